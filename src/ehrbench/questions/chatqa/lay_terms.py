"""The curated tables of the chatqa suite (`questions/data/lay_terms.yaml`, `brand_generic.yaml`): lay names of stored
concepts, brand/generic drug pairs, drug classes and alternative lab tests, and their loader."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


@dataclass(frozen=True)
class LayTerm:
    """Common names (`lay` first) for the stored `values` of one concept."""

    kind: str  # diagnoses | procedures | labs | vitals
    lay: str
    also: tuple[str, ...]
    values: tuple[str, ...]

    def names_for(self, stored: str) -> list[str]:
        """The names a user may say for `stored`: never its stored wording."""
        return [name for name in (self.lay, *self.also) if name.lower() != stored.lower()]


@dataclass(frozen=True)
class BrandGeneric:
    brand: str
    generic: str
    forms: tuple[str, ...] = ()  # other exact stored names of the same product (salts, release forms)
    drug_class: str | None = None

    @property
    def generic_names(self) -> tuple[str, ...]:
        return (self.generic, *self.forms)


@dataclass(frozen=True)
class DrugClass:
    name: str
    lay: str
    members: tuple[str, ...]


@dataclass(frozen=True)
class AlternativeLab:
    """`asked` / `alternative`: {"lay": ..., "<db>": stored name in that database}."""

    asked: Mapping[str, str]
    alternative: Mapping[str, str]


@dataclass(frozen=True)
class LayTerms:
    terms: Mapping[str, tuple[LayTerm, ...]]  # kind -> entries
    brands: tuple[BrandGeneric, ...]
    classes: Mapping[str, DrugClass]
    alternative_labs: tuple[AlternativeLab, ...]

    def term_for(self, kind: str, stored: str) -> LayTerm | None:
        return next((t for t in self.terms.get(kind, ()) if stored in t.values), None)

    def brand_for(self, stored_drug: str) -> BrandGeneric | None:
        return next((b for b in self.brands if stored_drug in b.generic_names), None)

    def class_names(self, drug_class: DrugClass) -> tuple[str, ...]:
        """A class's generic names and the brand names of its members (eICU records many drugs by brand)."""
        brands = [b.brand for b in self.brands if b.generic in drug_class.members or b.drug_class == drug_class.name]
        return tuple(dict.fromkeys([*drug_class.members, *brands]))


LAY_KINDS = ("diagnoses", "procedures", "labs", "vitals")


def load_lay_terms(directory: Path = DATA_DIR) -> LayTerms:
    """The curated tables `lay_terms.yaml` and `brand_generic.yaml` of `directory`."""
    lay = yaml.safe_load((directory / "lay_terms.yaml").read_text())
    drugs = yaml.safe_load((directory / "brand_generic.yaml").read_text())
    terms = {kind: tuple(LayTerm(kind, e["lay"], tuple(e.get("also", ())), tuple(e["values"])) for e in lay[kind])
             for kind in LAY_KINDS}
    classes = {name: DrugClass(name, c["lay"], tuple(c["members"])) for name, c in drugs["classes"].items()}
    brands = tuple(BrandGeneric(p["brand"], p["generic"], tuple(p.get("forms", ())), p.get("class"))
                   for p in drugs["pairs"])
    if unknown := sorted({b.drug_class for b in brands if b.drug_class} - set(classes)):
        raise ValueError(f"brand_generic.yaml: pairs name unknown classes {unknown}")
    alternatives = tuple(AlternativeLab(a["asked"], a["alternative"]) for a in lay["alternative_labs"])
    return LayTerms(terms, brands, classes, alternatives)
