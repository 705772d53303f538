"""The store names and roles: one definition every layer reads."""

from candlefire_pipeline import stores
from candlefire_pipeline.operations.serving import state as serving_state
from candlefire_pipeline.settings import Settings, parse_stores


def test_the_roles_name_known_stores_and_the_oracle_is_not_fed():
    assert {stores.REFERENCE, stores.CANDIDATE} == set(stores.GATED_STORES)
    assert set(stores.GATED_STORES) <= set(stores.STORE_NAMES)
    assert stores.ORACLE in stores.BACKEND_NAMES and stores.ORACLE not in stores.STORE_NAMES
    assert stores.REQUIRED_STORES == ("pgvector", "chroma")  # canonical order, as documented


def test_the_switch_and_the_settings_serve_only_the_servable_stores():
    assert set(serving_state.BACKEND_OF.values()) == set(stores.SERVABLE_STORES)
    assert Settings.stores == stores.DEFAULT_STORES == parse_stores(None)
