"""The keys a ``[[stores]]`` table writes a store setting under, and which settings are paths.

A plugin's settings model validates each table (``storebuild``): a field is read under its
alias, each string of an ``AliasChoices``, its name when it has no alias, and also its name when
the model's ``model_config`` says ``populate_by_name`` or ``validate_by_name`` (only its name
under ``validate_by_alias=False``). ``config`` anchors a relative path setting under each of
those keys; ``plugins`` and PH-6 name a setting by the first.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Annotated, Any, get_args, get_origin


def is_path_setting(field: Any) -> bool:
    """Whether a settings model field names a file or folder: typed ``ConfigPath`` (from
    ``agent_custody_state.plugin``) or ``pathlib.Path``, optional or not."""
    from agent_custody_state.stores.kit import PATH_SETTING

    def marked(annotation: Any) -> bool:
        if isinstance(annotation, type) and issubclass(annotation, PurePath):
            return True
        if get_origin(annotation) is Annotated:
            metadata = annotation.__metadata__
            return any(m is PATH_SETTING for m in metadata) or marked(get_args(annotation)[0])
        return any(marked(arg) for arg in get_args(annotation))

    return any(m is PATH_SETTING for m in field.metadata) or marked(field.annotation)


def setting_keys(name: str, field: Any, model: Any = None) -> tuple[str, ...]:
    """The keys a ``[[stores]]`` table may give the settings field ``name``: ``model_validate``
    reads a field's alias, not its name (``api_token`` with alias ``api-token`` is written
    ``api-token``); each string of an ``AliasChoices``; the name when there is no alias. With
    ``model`` (the field's settings model), as its ``model_config`` says: also the name under
    ``populate_by_name`` or ``validate_by_name``, and only the name when ``validate_by_alias``
    is false."""
    config = getattr(model, "model_config", None) or {}
    alias = field.validation_alias
    if isinstance(alias, str):
        aliases: tuple[str, ...] = (alias,)
    else:
        aliases = tuple(c for c in getattr(alias, "choices", ()) if isinstance(c, str))
        aliases = aliases or ((field.alias,) if field.alias else ())
    if config.get("validate_by_alias") is False:
        aliases = ()
    by_name = bool(config.get("validate_by_name") or config.get("populate_by_name"))
    extra = (name,) if (by_name or not aliases) and name not in aliases else ()
    return aliases + extra


def setting_key(name: str, field: Any, model: Any = None) -> str:
    """The key ``plugins`` shows for the settings field ``name`` (``setting_keys``' first)."""
    return setting_keys(name, field, model)[0]
