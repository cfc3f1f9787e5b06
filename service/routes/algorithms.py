from __future__ import annotations

from fastapi import APIRouter, Depends

from algorithms.registry import REGISTRY
from service.deps import api_key_header, bearer, owner
from service.problems import PROBLEM_RESPONSES, ProblemError
from service.schemas import AlgorithmDescription

router = APIRouter(prefix="/v1/algorithms", tags=["algorithms"],
                   dependencies=[Depends(api_key_header), Depends(bearer), Depends(owner)])


@router.get("", response_model=list[AlgorithmDescription])
def list_algorithms():
    """Every registered algorithm: parameter schema with defaults, capabilities, size limits."""
    return [spec.describe() for spec in REGISTRY.values()]


@router.get("/{name}", response_model=AlgorithmDescription, responses=PROBLEM_RESPONSES)
def get_algorithm(name: str):
    if name not in REGISTRY:
        raise ProblemError(404, f"unknown algorithm {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name].describe()
