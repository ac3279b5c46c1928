"""The peer engines' side: their own venv (bench/.peers) and the scripts that run inside it."""
