"""Config loading: precedence, validation messages, and the documented defaults file."""

import re
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


def test_lifecycle_alias_and_invalid_mode_is_an_error():
    assert load_config(env={"KB_LIFECYCLE_MODE": "lifecycle"}).kb.lifecycle_mode == "lifecycle"
    with pytest.raises(ConfigError, match="unknown lifecycle mode 'bogus' — use one of off, inform"):
        load_config(env={"KB_LIFECYCLE_MODE": "bogus"})


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


def test_non_utf8_config_file_is_a_clear_error(tmp_path):
    """Issue 13 (7): a config file in Latin-1 was a UnicodeDecodeError traceback."""
    from typer.testing import CliRunner

    from deepresearch.cli.main import app

    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("llm:\n  model: caf\xe9\n".encode("latin-1"))
    result = CliRunner().invoke(app, ["--home", str(tmp_path / "ws"), "--config", str(bad), "cache", "stats"])
    assert result.exit_code == 1
    assert (
        result.stderr.startswith(f"Error: config file {bad} is not UTF-8 text") and "save it as UTF-8" in result.stderr
    )
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    with pytest.raises(ConfigError, match="is a folder"):
        load_config(config_file=folder, env={})


@pytest.mark.parametrize("raw", ["@cf/meta/llama-3.1-8b-instruct", "[1,", "*x", "no", "off", "0123", "{a: 1", "null x"])
def test_text_keys_from_env_keep_the_raw_value(raw):
    """Issue 13 (7): `@cf/…`, `[1,`, `*x` were YAML tracebacks; `no` became False for a string key."""
    cfg = load_config(env={"DEEPRESEARCH__LLM__OPENAI__MODEL": raw, "DEEPRESEARCH_MODEL": raw})
    assert cfg.llm.openai.model == raw and cfg.llm.model_path == raw


def test_env_null_clears_an_optional_text_key_and_bad_numbers_name_the_key():
    assert load_config(env={"DEEPRESEARCH_MODEL": "null"}).llm.model_path is None
    for raw in ("[1,", "*x", "@x"):
        with pytest.raises(ConfigError, match=r"kb\.top_k: "):
            load_config(env={"DEEPRESEARCH__KB__TOP_K": raw})


def test_yaml_1_1_booleans_stay_words(tmp_path):
    """`lifecycle_mode: off` used to be read as False (then silently became freshness)."""
    path = tmp_path / "c.yaml"
    path.write_text("kb:\n  lifecycle_mode: off\nllm:\n  openai:\n    model: no\nsearch:\n  cache:\n    enabled: no\n")
    cfg = load_config(config_file=path, env={})
    assert (cfg.kb.lifecycle_mode, cfg.llm.openai.model, cfg.search.cache.enabled) == ("off", "no", False)
    assert load_config(env={"KB_LIFECYCLE_MODE": "off"}).kb.lifecycle_mode == "off"
    assert load_config(env={"DEEPRESEARCH__RESEARCH__KB_WRITE": "false"}).research.kb_write is False


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("kb.categories", {"market_data": {"ttl_days": -1, "decay": 0.1}}, "kb.categories.market_data.ttl_days"),
        ("kb.categories", {"market_data": {"ttl_days": 0, "decay": 0.1}}, "kb.categories.market_data.ttl_days"),
        ("kb.freshness_days", {"high": -7}, "freshness days must be positive"),
        ("kb.freshness_days", {"urgent": 1}, "unknown freshness levels"),
        ("search.cache.ttl_seconds", -5, "search.cache.ttl_seconds"),
        ("search.cache.ttl_seconds", float("nan"), "search.cache.ttl_seconds"),
        ("kb.categories", {"strategy": {"ttl_days": float("inf"), "decay": 0.1}}, "ttl_days"),
    ],
)
def test_negative_or_non_finite_ttls_and_freshness_days_are_rejected(key, value, problem):
    """Issue 13 (8): negative TTLs and freshness days were accepted."""
    with pytest.raises(ConfigError, match=re.escape(problem)):
        load_config(env={}, overrides={key: value})


def test_partial_freshness_days_keep_the_other_levels():
    cfg = load_config(env={}, overrides={"kb.freshness_days": {"high": 3}})
    assert cfg.kb.freshness_days == {"high": 3.0, "medium": 30.0, "low": 180.0}


def test_negative_ttl_through_the_cli_is_one_error_line(tmp_path):
    from typer.testing import CliRunner

    from deepresearch.cli.main import app

    cfg = tmp_path / "c.yaml"
    cfg.write_text("kb:\n  freshness_days: {medium: -30}\n")
    result = CliRunner().invoke(app, ["--home", str(tmp_path / "ws"), "--config", str(cfg), "kb", "stats"])
    assert result.exit_code == 1 and result.stderr.startswith("Error: invalid configuration")
    assert "freshness days must be positive" in result.stderr and "Traceback" not in result.output


def _dotted_keys(model=None, prefix=""):
    model = model or Config()
    for name in type(model).model_fields:
        value = getattr(model, name)
        if hasattr(value, "model_fields"):
            yield from _dotted_keys(value, prefix + name + ".")
        else:
            yield prefix + name


_KEYS = sorted(_dotted_keys())
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
    max_leaves=8,
)


@given(key=st.sampled_from(_KEYS), raw=st.text(max_size=40))
def test_fuzz_env_values_end_in_a_config_or_a_config_error(key, raw):
    """Issue 13 (fuzz): any environment value for any key is a Config or one ConfigError."""
    name = "DEEPRESEARCH__" + key.replace(".", "__").upper()
    try:
        load_config(env={name: raw})
    except ConfigError as exc:
        assert str(exc).startswith("invalid configuration")


@given(key=st.sampled_from(_KEYS + ["kb", "llm.openai", "search", "nope.x"]), value=_VALUES)
def test_fuzz_yaml_documents_end_in_a_config_or_a_config_error(tmp_path_factory, key, value):
    """Issue 13 (fuzz): any YAML document shaped like a config is a Config or one ConfigError."""
    tree: dict = {}
    node = tree
    *parents, leaf = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    path = tmp_path_factory.mktemp("cfg") / "c.yaml"
    path.write_text(yaml.safe_dump(tree, allow_unicode=True), encoding="utf-8")
    try:
        load_config(config_file=path, env={})
    except ConfigError as exc:
        assert str(exc)


@given(st.binary(max_size=120))
def test_fuzz_config_bytes_end_in_a_config_or_a_config_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("cfg") / "c.yaml"
    path.write_bytes(data)
    try:
        load_config(config_file=path, env={})
    except ConfigError:
        pass
