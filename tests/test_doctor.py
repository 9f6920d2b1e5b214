"""`deepresearch doctor`: real components, offline, exit codes."""

import json
import socket

import pytest
from typer.testing import CliRunner

from deepresearch.cli.main import app
from deepresearch.doctor import compiled_cpu_features, host_cpu_flags, llama_build_report
from deepresearch.doctor import metadata as doctor_metadata

runner = CliRunner()


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a network connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.mark.slow
def test_doctor_all_ok_with_network_blocked(home, no_network):
    result = runner.invoke(app, ["--home", str(home), "doctor", "--json"])
    report = json.loads(result.stdout)
    failed = [c for c in report["checks"] if not c["ok"]]
    assert result.exit_code == 0 and report["ok"], failed
    names = {c["name"] for c in report["checks"]}
    assert names == {
        "sqlite",
        "sqlite-vec",
        "fts5-trigram",
        "embedding-model",
        "llama-build",
        "llm",
        "duckdb",
        "workspace",
    }
    detail = {c["name"]: c["detail"] for c in report["checks"]}
    assert "dimension 384" in detail["embedding-model"]
    assert "context" in detail["llm"]
    assert detail["llama-build"].startswith("llama-cpp-python ") and "build (" in detail["llama-build"]


def test_doctor_reports_failure_with_fix_and_exit_1(home, monkeypatch):
    monkeypatch.setenv("DEEPRESEARCH_DISABLE_VEC", "1")
    result = runner.invoke(app, ["--home", str(home), "doctor", "--skip", "embedding-model", "--skip", "llm"])
    assert result.exit_code == 1
    assert "FAIL sqlite-vec" in result.stdout
    assert "fix: pip install sqlite-vec" in result.stdout


def test_doctor_missing_model_file_names_the_fix(home):
    cfg = home / "config.yaml"
    cfg.write_text("llm:\n  model_path: /nonexistent/model.gguf\n")
    result = runner.invoke(app, ["--home", str(home), "doctor", "--json", "--skip", "embedding-model"])
    report = json.loads(result.stdout)
    llm = next(c for c in report["checks"] if c["name"] == "llm")
    assert result.exit_code == 1
    assert not llm["ok"] and "model file not found: /nonexistent/model.gguf" in llm["detail"]


def _can_unshare_network() -> bool:
    import shutil
    import subprocess

    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _can_unshare_network(), reason="needs `unshare -n` (root or user namespaces)")
def test_doctor_passes_in_a_process_without_network(home):
    """The real CLI in a network namespace with no interfaces up: every check still passes."""
    import subprocess
    import sys

    proc = subprocess.run(
        ["unshare", "-n", sys.executable, "-m", "deepresearch", "--home", str(home), "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], proc.stdout + proc.stderr


# llama.cpp build report: logic on real llama_print_system_info() strings and /proc/cpuinfo flag sets.
V3_INFO = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 |"
V3_HOST = {"fpu", "pni", "ssse3", "sse4_2", "avx", "avx2", "f16c", "fma", "bmi2"}
PORTABLE = {"kind": "portable", "baseline": "x86-64-v3", "built_by": "scripts/wheelhouse.sh", "built_at": "T"}


def test_compiled_features_parsed_from_system_info():
    assert compiled_cpu_features(V3_INFO) == ["SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2"]
    assert compiled_cpu_features("CPU : SSE3 = 1 | AVX = 0 | AVX512 = 1 |") == ["SSE3", "AVX512"]


def test_native_build_on_its_own_cpu_is_ok_without_warning():
    detail, warning = llama_build_report(compiled_cpu_features(V3_INFO), None, V3_HOST)
    assert detail.startswith("native build (") and "AVX2" in detail and warning == ""


def test_native_build_from_another_cpu_warns_and_names_the_rebuild():
    detail, warning = llama_build_report(compiled_cpu_features(V3_INFO), None, V3_HOST | {"avx512f"})
    assert warning.startswith("built natively on another CPU: this one also has AVX512")
    assert "pip install --force-reinstall --no-cache-dir llama-cpp-python" in warning


def test_build_using_instructions_this_cpu_lacks_fails():
    info = V3_INFO + " AVX512 = 1 |"
    with pytest.raises(RuntimeError, match="compiled for AVX512, which this CPU lacks: expect 'illegal instruction'"):
        llama_build_report(compiled_cpu_features(info), None, V3_HOST)
    with pytest.raises(RuntimeError, match="compiled for AVX AVX2 F16C FMA BMI2, which this CPU lacks"):
        llama_build_report(compiled_cpu_features(V3_INFO), PORTABLE, {"pni", "ssse3", "sse4_2"})


def test_portable_build_reports_its_baseline_and_unused_features_without_warning():
    detail, warning = llama_build_report(compiled_cpu_features(V3_INFO), PORTABLE, V3_HOST | {"avx512f"})
    assert detail.startswith("portable build (x86-64-v3: SSE3 SSSE3 AVX AVX2 F16C FMA BMI2)")
    assert "this CPU also has AVX512, unused by the portable build" in detail and warning == ""


def test_unknown_host_cpu_is_said_not_guessed(tmp_path):
    assert host_cpu_flags(tmp_path / "no-cpuinfo") is None
    detail, warning = llama_build_report(["AVX2"], None, None)
    assert "this CPU's features are unknown, not compared" in detail and warning == ""


def test_host_flags_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu avx2 fma\n")
    assert host_cpu_flags(cpuinfo) == {"fpu", "avx2", "fma"}


def test_doctor_text_output_marks_a_warning(home, monkeypatch):
    import llama_cpp

    import deepresearch.doctor as doctor

    monkeypatch.setattr(doctor, "host_cpu_flags", lambda: V3_HOST | {"avx512f", "avx512vbmi"})
    monkeypatch.setattr(doctor.metadata, "distribution", _no_build_record)
    # The build's features are this test's, not those of whatever CPU compiled the installed llama.cpp.
    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: V3_INFO.encode())
    result = runner.invoke(app, ["--home", str(home), "doctor", "--skip", "embedding-model", "--skip", "llm"])
    assert "warn llama-build" in result.stdout, result.stdout
    assert "     warning: built natively on another CPU: this one also has AVX512 AVX512_VBMI" in result.stdout


def test_native_build_leaves_amx_out_without_warning_and_an_amx_build_warns():
    host = V3_HOST | {"amx_int8", "amx_tile"}
    detail, warning = llama_build_report(compiled_cpu_features(V3_INFO), None, host)
    assert warning == "" and "AMX" not in detail
    amx = compiled_cpu_features(V3_INFO + " AMX_INT8 = 1 |")
    detail, warning = llama_build_report(amx, None, host)
    assert "AMX_INT8" in detail and "SIGSEGV" in warning and "pip cache remove llama_cpp_python" in warning


def _no_build_record(name):
    raise doctor_metadata.PackageNotFoundError(name)
