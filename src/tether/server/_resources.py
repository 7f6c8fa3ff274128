"""The resource routes under ``/v1``: documents, indexing jobs, sessions, the library
folder. (Filled in by the resources work.)"""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
