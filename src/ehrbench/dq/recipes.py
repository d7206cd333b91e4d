"""Recipes of the audit tasks (`recipes/default.yaml`, or a file given to the build): which errors each task's
corrupted copy gets. Loading checks every family, sub-type and table against the injectors, so a typo fails before
the build does any work, with the file and the field named."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from ehrbench.dq.injectors import INJECTORS
from ehrbench.errors import ConfigError, MissingInputError
from ehrbench.parameter_errors import one_line, path_with_positions
from ehrbench.settings import SEED_MAX

DEFAULT_RECIPES = Path(__file__).parent / "recipes" / "default.yaml"
# Every task copies the extract and an auditor reads it whole: 10,000 patients is already a large audit (default 100).
MAX_EXTRACT_PATIENTS = 10_000


class Recipe(BaseModel):
    family: str
    subtypes: list[str] = Field(min_length=1)
    tables: list[str] | None = Field(None, description="Tables it may corrupt; default every table a sub-type can.")
    patients: int | None = Field(None, ge=1, le=MAX_EXTRACT_PATIENTS,
                                 description="Patients in scope (a seeded sample); default all.")
    count: int = Field(ge=1, le=1000, description="Errors of each sub-type.")
    seed: int = Field(0, ge=0, le=SEED_MAX, description="Seed of the recipe's draws.")

    @field_validator("family")
    @classmethod
    def _known_family(cls, family: str) -> str:
        if family not in INJECTORS:
            raise ValueError(f"unknown family {family!r}; expected one of {', '.join(INJECTORS)}")
        return family

    @model_validator(mode="after")
    def _known_subtypes_and_tables(self) -> Recipe:
        known = INJECTORS[self.family]
        for subtype in self.subtypes:
            if subtype not in known:
                raise ValueError(f"family {self.family} has no sub-type {subtype!r}; expected one of "
                                 f"{', '.join(known)}")
        if self.tables is not None:
            for subtype in self.subtypes:
                if not set(known[subtype].tables) & set(self.tables):
                    raise ValueError(f"sub-type {subtype} corrupts {', '.join(known[subtype].tables)}, none of the "
                                     f"recipe's tables {', '.join(self.tables)}")
            reachable = {table for subtype in self.subtypes for table in known[subtype].tables}
            stray = sorted(set(self.tables) - reachable)
            if stray:
                raise ValueError(f"sub-types {', '.join(self.subtypes)} cannot corrupt table(s) {', '.join(stray)}; "
                                 f"they corrupt {', '.join(sorted(reachable))}")
        return self


class TaskRecipe(BaseModel):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    recipes: list[Recipe] = Field(min_length=1)

    @property
    def families(self) -> list[str]:
        return list(dict.fromkeys(recipe.family for recipe in self.recipes))


class ExtractSettings(BaseModel):
    patients: int = Field(100, ge=1, le=MAX_EXTRACT_PATIENTS, description="Patients of the audit extract.")


class RecipeBook(BaseModel):
    extract: ExtractSettings = Field(default_factory=ExtractSettings)
    tasks: list[TaskRecipe] = Field(min_length=1)

    @field_validator("tasks")
    @classmethod
    def _unique_ids(cls, tasks: list[TaskRecipe]) -> list[TaskRecipe]:
        ids = [task.id for task in tasks]
        repeated = sorted({task_id for task_id in ids if ids.count(task_id) > 1})
        if repeated:
            raise ValueError(f"task id(s) {', '.join(repeated)} appear more than once")
        return tasks


def load_recipes(path: Path | None = None) -> RecipeBook:
    path = Path(path) if path else DEFAULT_RECIPES
    try:
        data = yaml.safe_load(path.read_text())
        return RecipeBook.model_validate(data)
    except FileNotFoundError:
        raise MissingInputError(f"{path}: no recipe file") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not YAML: {exc}") from None
    except ValidationError as exc:
        # named with positions (tasks.0.recipes.1.count): they say which task and recipe
        raise ConfigError(f"{path}: invalid recipes: {one_line(exc, RecipeBook, path_with_positions)}") from None
