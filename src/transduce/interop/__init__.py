"""Conversion to and from other toolkits' model formats."""
