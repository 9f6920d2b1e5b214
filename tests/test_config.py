"""Config loading: precedence, validation messages, and the documented defaults file."""

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from deepresearch.config import Config, load_config
from deepresearch.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def test_defaults_file_matches_code_defaults():
    data = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    assert Config.model_validate(data) == Config()


def _keys(model, prefix=""):
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        yield prefix + name, field
        if hasattr(value, "model_fields"):
            yield from _keys(value, prefix + name + ".")


def test_every_field_is_documented_and_described():
    text = (ROOT / "configs" / "default.yaml").read_text()
    for dotted, field in _keys(Config()):
        assert field.description, f"{dotted} has no description"
        assert f"{dotted.split('.')[-1]}:" in text, f"{dotted} missing from configs/default.yaml"


def test_precedence_flag_over_env_over_yaml_over_default(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("search:\n  results_per_query: 7\nresearch:\n  max_loops: 4\nkb:\n  top_k: 3\n")
    env = {"DEEPRESEARCH__RESEARCH__MAX_LOOPS": "5", "DEEPRESEARCH__KB__TOP_K": "4"}
    cfg = load_config(config_file=cfg_file, env=env, overrides={"kb.top_k": 9})
    assert cfg.search.results_per_query == 7  # yaml over default
    assert cfg.research.max_loops == 5  # env over yaml
    assert cfg.kb.top_k == 9  # flag over env
    assert cfg.research.queries_per_loop == Config().research.queries_per_loop  # default


def test_flag_value_none_means_not_given():
    cfg = load_config(env={"DEEPRESEARCH__KB__TOP_K": "4"}, overrides={"kb.top_k": None})
    assert cfg.kb.top_k == 4


def test_workspace_yaml_and_env_file_choice(tmp_path):
    home = tmp_path / "ws"
    home.mkdir()
    (home / "config.yaml").write_text("kb:\n  top_k: 2\n")
    assert load_config(home=home, env={}).kb.top_k == 2
    other = tmp_path / "other.yaml"
    other.write_text("kb:\n  top_k: 6\n")
    assert load_config(home=home, env={"DEEPRESEARCH_CONFIG": str(other)}).kb.top_k == 6


def test_lifecycle_alias_and_invalid_mode_falls_back_to_freshness():
    assert load_config(env={"KB_LIFECYCLE_MODE": "lifecycle"}).kb.lifecycle_mode == "lifecycle"
    assert load_config(env={"KB_LIFECYCLE_MODE": "bogus"}).kb.lifecycle_mode == "freshness"


def test_invalid_yaml_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kb:\n  top_k: [1,\n")
    with pytest.raises(ConfigError, match=r"invalid YAML in .*bad.yaml \(line \d+, column \d+\)"):
        load_config(config_file=bad, env={})


def test_unknown_key_and_wrong_type_name_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kb:\n  top_k: many\n  colour: red\n")
    with pytest.raises(ConfigError) as err:
        load_config(config_file=bad, env={})
    assert "kb.top_k:" in str(err.value) and "kb.colour:" in str(err.value)


def test_missing_and_non_mapping_files(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(config_file=tmp_path / "nope.yaml", env={})
    listy = tmp_path / "list.yaml"
    listy.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(config_file=listy, env={})


def test_unknown_category_rejected():
    with pytest.raises(ConfigError, match="unknown categories"):
        load_config(env={}, overrides={"kb.categories": {"gossip": {"ttl_days": 1, "decay": 0.1}}})


@given(st.text(max_size=200))
def test_arbitrary_yaml_text_never_crashes(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("cfg") / "c.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        load_config(config_file=path, env={})
    except ConfigError:
        pass
