from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from algorithms.registry import REGISTRY
from service.deps import api_key_header, bearer, owner
from service.problems import ProblemError, problem_responses
from service.schemas import AlgorithmDescription

router = APIRouter(prefix="/v1/algorithms", tags=["algorithms"],
                   dependencies=[Depends(api_key_header), Depends(bearer), Depends(owner)])


@router.get("", response_model=list[AlgorithmDescription], responses=problem_responses())
def list_algorithms():
    """Every registered algorithm: parameter schema with defaults, capabilities, size limits."""
    return [spec.describe() for spec in REGISTRY.values()]


@router.get("/{name}", response_model=AlgorithmDescription,
            responses=problem_responses(404, 422))
def get_algorithm(name: Annotated[str, Path(pattern=r"^[a-z0-9_]{1,64}$",
                                            description="Algorithm name, e.g. itersvr.")]):
    if name not in REGISTRY:
        raise ProblemError(404, f"unknown algorithm {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name].describe()
