"""The GPU path, checked without a GPU: what a job's device settings become in TRL's config on each kind of
host, the refusals that name the field, and `make gpu-smoke` on a host without CUDA."""

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_jobs.addition import addition_rows
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.device import DeviceError, HostInfo, device_args

ROOT = Path(__file__).resolve().parents[2]
CPU_HOST = HostInfo(cuda_devices=0)
GPU_HOST = HostInfo(cuda_devices=1, bf16=True, vllm=True)


def test_cpu_host_trains_in_float32_without_vllm_whatever_the_job_asks():
    for device in ("auto", "cpu"):
        args = device_args(device=device, use_vllm=True, host=CPU_HOST)
        assert args == {"use_cpu": True, "bf16": False, "activation_checkpointing": False, "use_vllm": False}


def test_activation_checkpointing_on_or_off_overrides_the_hosts_default():
    assert device_args(device="cpu", use_vllm=False, host=CPU_HOST, activation_checkpointing="on")[
        "activation_checkpointing"
    ]
    assert not device_args(device="auto", use_vllm=False, host=GPU_HOST, activation_checkpointing="off")[
        "activation_checkpointing"
    ]
    assert device_args(device="auto", use_vllm=False, host=GPU_HOST, activation_checkpointing="auto")[
        "activation_checkpointing"
    ]


def test_gpu_host_uses_bf16_gradient_checkpointing_and_vllm_colocate():
    args = device_args(device="auto", use_vllm=True, host=GPU_HOST)
    assert args["use_cpu"] is False and args["bf16"] is True and args["fp16"] is False
    assert args["activation_checkpointing"] is True
    assert args["use_vllm"] is True and args["vllm_mode"] == "colocate"
    assert 0 < args["vllm_gpu_memory_utilization"] < 1


def test_gpu_host_without_bf16_falls_back_to_fp16_and_vllm_can_be_turned_off():
    args = device_args(device="cuda", use_vllm=False, host=HostInfo(cuda_devices=2, bf16=False, vllm=True))
    assert args["bf16"] is False and args["fp16"] is True and args["use_vllm"] is False
    assert "vllm_mode" not in args


def test_the_mapping_names_only_fields_trl_knows_and_the_cpu_one_builds_a_config(tmp_path):
    from trl import GRPOConfig

    known = set(GRPOConfig.__dataclass_fields__)
    for host in (CPU_HOST, GPU_HOST):
        assert set(device_args(device="auto", use_vllm=True, host=host)) <= known
    args = GRPOConfig(
        output_dir=str(tmp_path), report_to="none", **device_args(device="cpu", use_vllm=True, host=CPU_HOST)
    )
    assert args.use_cpu and not args.bf16 and not args.use_vllm


def test_checkpointing_takes_the_name_the_installed_transformers_knows(monkeypatch):
    # The GPU set (requirements/gpu.txt) pins transformers 5.20 for vLLM, where the field is still called
    # gradient_checkpointing: GRPOConfig refused the newer name there (seen on an H200).
    import transformers

    class Before521:
        def __init__(self, output_dir=None, gradient_checkpointing=False, bf16=False):
            pass

    monkeypatch.setattr(transformers, "TrainingArguments", Before521)
    args = device_args(device="auto", use_vllm=False, host=GPU_HOST)
    assert args["gradient_checkpointing"] is True and "activation_checkpointing" not in args


@pytest.mark.parametrize(
    ("device", "use_vllm", "host", "field"),
    [
        ("cuda", False, CPU_HOST, "device:"),
        ("auto", True, HostInfo(cuda_devices=1, bf16=True, vllm=False), "use_vllm:"),
        ("tpu", False, GPU_HOST, "device:"),
    ],
)
def test_what_the_host_cannot_do_is_refused_naming_the_field(device, use_vllm, host, field):
    with pytest.raises(DeviceError) as error:
        device_args(device=device, use_vllm=use_vllm, host=host)
    assert str(error.value).startswith(field)


@pytest.mark.parametrize(
    ("overrides", "field"), [({"device": "gpu"}, "device"), ({"use_vllm": "yes"}, "use_vllm")]
)
def test_job_config_checks_the_device_fields(tmp_path, overrides, field):
    values = dict(
        model_store=str(tmp_path),
        output_dir=str(tmp_path),
        rows=addition_rows(n=8, seed=0),
        verifiers=[{"name": "exact", "spec": {"type": "exact_match"}, "weight": 1.0}],
    )
    config = GRPOJobConfig(**values)
    assert (config.device, config.use_vllm) == ("auto", True)
    assert "vLLM" in GRPOJobConfig.field_help()["use_vllm"]
    with pytest.raises(ValueError, match=f"^{field}:"):
        GRPOJobConfig(**values, **overrides)


@pytest.mark.parametrize("options", [["--steps", "1"], ["--agent", "--model smollm2 --seeds 0"]])
def test_gpu_smoke_on_a_host_without_cuda_says_so_and_exits_non_zero(options):
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_smoke.py"), *options],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "no CUDA device on this host" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    "options, message",
    [
        ("--model smollm2 --bogus 1", "unrecognized arguments: --bogus 1"),
        ("--seeds 0,one", "argument --seeds: '0,one' is not a comma-separated list of integers"),
        ("--model smollm2 --max-turns 1", "environment.turn_tokens: 96 is more than token_budget (64)"),
        ("--mutants 33", "argument --mutants: '33' is not a whole number from 0 to 32 per repository"),
        (
            "--warmup-mutants -1",
            "argument --warmup-mutants: '-1' is not a whole number from 0 to 32 per repository",
        ),
    ],
)
def test_gpu_smoke_agent_names_a_wrong_option_on_any_host_before_it_runs(options, message):
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_smoke.py"), "--agent", options],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "gpu_smoke.py --agent: error: " + message in result.stderr
    assert "no CUDA device" not in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def load_gpu_smoke():
    spec = importlib.util.spec_from_file_location("gpu_smoke", ROOT / "scripts" / "gpu_smoke.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_smoke_agent_runs_the_benchs_job_on_the_tasks_the_bench_asks_the_platform_for(tmp_path):
    from bench import agent_learning
    from gpu_jobs.agent.taskpack import pack_rows, with_mutants

    options = "--model smollm2 --train-tasks 5 --held-tasks 3 --lr 3e-5 --beta 0.04 --habit 0.5 --max-turns 8 --seeds 2"
    args = agent_learning.parser().parse_args(shlex.split(options))
    config = agent_learning.agent_config(
        args, 2, store=tmp_path, output_dir=tmp_path / "job", overrides={"device": "cuda", "use_vllm": False}
    )
    # POST /datasets/packs/agent takes pack_rows()[offset:][:limit]: the bench asks for limit 5, then offset 5.
    assert [row["task"] for row in config.rows] == [row["task"] for row in pack_rows()[:5]]
    assert [row["task"] for row in config.eval_rows] == [row["task"] for row in pack_rows()[5:8]]
    assert config.verifiers == []
    params = agent_learning.job_params(args, 2)
    for name in (
        "model",
        "lora_rank",
        "learning_rate",
        "beta",
        "seed",
        "max_steps",
        "activation_checkpointing",
    ):
        assert getattr(config, name) == params[name], name
    assert config.environment["formula"] == params["environment"]["formula"]
    assert (config.environment["max_turns"], config.environment["token_budget"]) == (8, 8 * 64)
    assert (config.device, config.use_vllm) == ("cuda", False)
    # --held-mutants: each held-out repository's own further bugs, as the pack's mutants option gives them.
    args = agent_learning.parser().parse_args(shlex.split(options + " --held-mutants 2"))
    config = agent_learning.agent_config(args, 2, store=tmp_path, output_dir=tmp_path / "job", overrides={})
    held = [row["task"] for row in config.eval_rows]
    assert held == [row["task"] for row in with_mutants(pack_rows()[5:8], 2)]
    repositories = {row["task"] for row in pack_rows()[5:8]}
    assert len(held) > 3 and {task.split("~")[0] for task in held} <= repositories


def test_the_agent_runs_progress_sink_prints_steps_evaluations_and_alarms_as_they_come(capsys):
    sink = load_gpu_smoke().ProgressSink("seed 3")
    sink.emit(
        "metric", {"step": 0, "eval_agent/solved": 0.25, "eval_agent/valid_calls": 0.5, "eval_agent/turns": 4}
    )
    sink.emit("metric", {"step": 1, "reward": 0.6, "episode/format": 0.9, "step_time": 12.0})
    sink.emit("metric", {"step": 1, "loss": 0.1})
    sink.emit(
        "alarm", {"name": "tool_calls_fading", "step": 2, "message": "the turns with a well-formed call fell"}
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "gpu-smoke: seed 3 step 0: held-out solved 0.25 edited_then_tested nan tested_before_finish nan "
        "valid_calls 0.50 turns 4.00",
        "gpu-smoke: seed 3 step 1: train reward 0.60 episode/tests nan episode/edited_then_tested nan "
        "episode/format 0.90 step_time 12.00",
        "gpu-smoke: seed 3 step 2: alarm tool_calls_fading: the turns with a well-formed call fell",
    ]
    assert len(sink.events) == 4


def test_the_agent_bench_writes_each_seeds_held_out_episodes_where_asked(tmp_path):
    from bench import agent_learning

    args = agent_learning.parser().parse_args(["--held-out-episodes", str(tmp_path / "episodes")])
    events = [
        {
            "kind": "rollout",
            "payload": {"step": 0, "held_out": True, "task": "clamp", "turns": [{"turn": 1}]},
        },
        {"kind": "rollout", "payload": {"step": 1, "task": "fizzbuzz", "turns": []}},
        {"kind": "metric", "payload": {"step": 0, "eval_agent/solved": 0.0}},
        {"kind": "rollout", "payload": {"step": 2, "held_out": True, "task": "gcd", "turns": []}},
    ]
    path = agent_learning.write_held_out_episodes(args.held_out_episodes, 3, events)
    assert path == tmp_path / "episodes" / "seed-3.json"
    assert [(e["step"], e["task"]) for e in json.loads(path.read_text())] == [(0, "clamp"), (2, "gcd")]
