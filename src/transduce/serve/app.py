"""The application: one loaded model (or an ensemble), its batcher, and the routes around them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from ..decode.pipeline import Loaded, decoding_engine
from ..decode.shortlist import Shortlist
from ..store.languages import Languages, LanguagesError, model_languages
from ..store.load import LoadedModel
from .libretranslate import router as libretranslate_router
from .libretranslate_errors import http_error
from .limits import Limits
from .middleware import BodyLimit, StrictJsonRoute, validation_error
from .routes import Served, package_version, router
from .scheduler import Batcher


def create_app(
    models: Loaded,
    limits: Limits | None = None,
    api_key: str | None = None,
    shortlist: Shortlist | None = None,
    languages: Languages | None = None,
) -> FastAPI:
    """The ASGI application serving one loaded model (on the engine it was opened for), or the
    ensemble of several (`shortlist`: decode every batch with it). `languages`: what the
    LibreTranslate-compatible API names (default: the checkpoint's, where it knows them)."""
    limits = limits or Limits()
    if api_key == "":
        raise ValueError("the API key is empty; give a non-empty key, or none to serve without one")
    loaded, engine = decoding_engine(models, shortlist)  # a shortlist that does not fit: refused here
    if loaded.config.model.syntax_mask != "none":
        raise ValueError("serving syntax-aware models (which need source trees) is not supported")
    members = [models] if isinstance(models, LoadedModel) else list(models)
    batcher = Batcher(engine, limits)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        worker = asyncio.create_task(batcher.run())
        yield
        worker.cancel()
        batcher.stop()

    # No /docs or /redoc: their pages load scripts from a CDN, so they break offline; /openapi.json stays.
    app = FastAPI(
        title="transduce", version=package_version(), lifespan=lifespan, docs_url=None, redoc_url=None
    )
    app.router.route_class = StrictJsonRoute
    app.add_exception_handler(RequestValidationError, validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, http_error)  # type: ignore[arg-type]
    app.add_middleware(BodyLimit, limit=limits.max_body_bytes)
    app.include_router(router)
    app.include_router(libretranslate_router)
    app.state.served = Served(loaded, engine, members, limits, batcher)
    app.state.batcher = batcher
    app.state.api_key = api_key
    app.state.languages = languages or _known_languages(loaded)
    return app


def _known_languages(loaded: LoadedModel) -> Languages | None:
    """The checkpoint's languages where it knows them; None leaves the LibreTranslate-compatible
    API saying how to name them."""
    try:
        return model_languages(loaded)
    except LanguagesError:
        return None
