"""Every standard out-of-memory message, whole or shortened, alone, behind a launcher's prefix or
inside a Ray task's traceback, is diagnosed as its kind, with every number and label it shows read
back exactly (tests/doctor/messages: templates from the printers' sources)."""

from __future__ import annotations

import re

import pytest

from oomless.doctor import Kind, clean, diagnose
from oomless.doctor.findings import DEVICE
from tests.doctor.messages import RAY_TASK_PHASE, WRAPPERS, Entry, load, ray_task_wrapped

ENTRIES = load()
CASES = [(e, form, wrapper) for e in ENTRIES for form in (None, *e.shortened) for wrapper in WRAPPERS]
FIXED_PHASE_KINDS = {"vllm_startup_free_memory", "vllm_no_cache_blocks", "vllm_max_seq_len", "vllm_warmup_oom"}


def _case_id(case: tuple[Entry, str | None, str]) -> str:
    entry, form, wrapper = case
    return f"{entry.id}-{'whole' if form is None else 'short' + str(entry.shortened.index(form))}-{wrapper}"


def _check(entry: Entry, form: str | None, text: str) -> None:
    d = diagnose(clean(text))
    f = d.primary
    assert f is not None, "not recognised"
    assert (f.kind.value, f.device) == (entry.kind, entry.device)
    numbers, labels = entry.expected(form)
    if form is None:
        assert f.variant == entry.variant
        assert f.numbers == {**numbers, **entry.fixed_numbers}
    else:
        whole_numbers, _ = entry.expected()
        assert {k: f.numbers.get(k) for k in numbers} == numbers
        assert set(f.numbers) <= set(whole_numbers) | set(entry.fixed_numbers), "a number the fragment does not show"
    assert {k: f.labels.get(k) for k in labels} == labels
    assert {k: f.labels.get(k) for k in entry.fixed_labels} == entry.fixed_labels or form is not None
    if entry.phase is not None:
        assert d.phase.phase == entry.phase
    assert d.cause and d.fixes


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_message_is_read_whole_shortened_and_prefixed(case: tuple[Entry, str | None, str]) -> None:
    entry, form, wrapper = case
    _check(entry, form, WRAPPERS[wrapper](entry.render(form)))


RAISED = [(e, form) for e in ENTRIES if e.raised_as for form in (None, *e.shortened)]


@pytest.mark.parametrize("case", RAISED, ids=[f"{e.id}-{'whole' if f is None else 'short'}" for e, f in RAISED])
def test_message_inside_a_ray_task_traceback(case: tuple[Entry, str | None]) -> None:
    entry, form = case
    text = ray_task_wrapped(entry, entry.render(form))
    _check(entry, form, text)
    if entry.kind not in FIXED_PHASE_KINDS:
        assert diagnose(clean(text)).phase.phase == RAY_TASK_PHASE  # from the Ray task's frames


LOG_BEFORE = (
    "INFO 11-27 02:40:01 [__init__.py:239] Automatically detected platform cuda.\n"
    "Loading checkpoint shards: 100%|██████████| 4/4 [00:07<00:00,  1.88s/it]\n"
    "step 1/500 | loss 0.412 | reward 0.180 | kl 0.0000\n"
    "step 2/500 | loss 0.397 | reward 0.212 | kl 0.0013\n"
)
LOG_AFTER = "wandb: Run history:\nwandb:   loss ▇▆▅\nException ignored in atexit callback\n"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_message_inside_the_rest_of_a_log(entry: Entry) -> None:
    # A log around the message changes nothing the message says.
    d = diagnose(clean(LOG_BEFORE + entry.render() + "\n" + LOG_AFTER))
    assert d.primary is not None and d.primary.kind.value == entry.kind
    numbers, labels = entry.expected()
    assert d.primary.numbers == {**numbers, **entry.fixed_numbers}
    assert {k: d.primary.labels.get(k) for k in labels} == labels


def test_the_log_before_a_bare_kill_gives_its_phase() -> None:
    text = "Loading checkpoint shards:  50%|█████     | 2/4 [00:41<00:41, 20.60s/it]\nKilled\n"
    d = diagnose(text)
    assert d.primary is not None and d.primary.kind == Kind.process_killed and d.phase.phase == "load"


def test_a_direct_oom_is_primary_over_the_kill_that_follows_it() -> None:
    kernel = next(e for e in ENTRIES if e.id == "kernel-killed-global").render()
    bash = next(e for e in ENTRIES if e.id == "bash-noninteractive").render()
    d = diagnose(bash + "\n" + kernel + "\n")
    assert [f.kind for f in d.findings] == [Kind.process_killed, Kind.kernel_oom_kill]
    assert d.primary.kind == Kind.kernel_oom_kill


def test_prose_about_an_oom_is_not_one() -> None:
    for text in ("retrying after CUDA out of memory with a smaller batch", "Killed processes are restarted by the agent",
                 "exit code 0", "the job was not Killed", "RayTaskError(ValueError): bad input"):
        assert diagnose(text).primary is None, text


def test_sigkill_from_a_launcher_names_the_process() -> None:
    torchrun = next(e for e in ENTRIES if e.id == "torchrun-child-failed")
    found = [f for f in diagnose(torchrun.render()).findings if f.kind == Kind.process_killed]
    assert len(found) == 1 and found[0].numbers == {"pid": torchrun.values["pid"]}  # two lines, one message


def test_corpus_covers_every_kind_and_names_its_sources() -> None:
    assert {e.kind for e in ENTRIES} == {k.value for k in Kind}
    assert all(DEVICE[Kind(e.kind)] == e.device for e in ENTRIES)
    assert len({e.id for e in ENTRIES}) == len(ENTRIES)
    for e in ENTRIES:
        # a repository and a file in it, and the version or commit read
        assert re.match(r"[\w.-]+/[\w.-]+ [\w./-]+\.(?:cpp|cc|c|h|py|rst)\b", e.source), e.id
        assert re.search(r"\d", e.source), f"{e.id}: no version"
        assert set(re.findall(r"\{(\w+)\}", e.template)) == set(e.values), e.id


def test_new_kinds_say_what_to_change() -> None:
    warmup = diagnose(next(e for e in ENTRIES if e.id == "vllm-sampler-warmup").render())
    assert [f.knob for f in warmup.fixes][:2] == ["rollout.max_num_seqs", "rollout.gpu_memory_utilization"]
    assert "512 dummy requests" in warmup.cause
    killed = diagnose(next(e for e in ENTRIES if e.id == "bash-noninteractive").render())
    assert "SIGKILL" in killed.cause and "OOM killer" in killed.cause and killed.fixes
    ray_task = diagnose(next(e for e in ENTRIES if e.id == "torch-ray-task-error").render())
    assert "WorkerDict.actor_rollout_generate_sequences" in ray_task.cause and ray_task.phase.detail == "generate"


def test_a_torch_oom_chained_to_vllm_warm_up_gets_the_warm_up_fixes() -> None:
    # vLLM re-raises the allocator's error from `_dummy_sampler_run` ("The above exception was the
    # direct cause ..."): the allocator's message keeps its sizes, the warm-up names the knobs.
    torch = next(e for e in ENTRIES if e.id == "torch-cuda-current").render()
    warmup = next(e for e in ENTRIES if e.id == "vllm-sampler-warmup").render()
    frame = '  File "/opt/vllm/vllm/v1/worker/gpu_model_runner.py", line 2460, in _dummy_sampler_run\n    out = self.sampler(logits)\n'
    for text in (f"Traceback (most recent call last):\n{frame}{torch}\n\nThe above exception was the direct cause of the "
                 f"following exception:\n\n{warmup}\n", f"{torch}\n{warmup}\n"):
        d = diagnose(text)
        assert d.primary.kind == Kind.torch_gpu_oom and d.primary.numbers
        assert (d.phase.phase, d.phase.detail) == ("load", "sampler_warmup")
        knobs = [f.knob for f in d.fixes]  # (expandable segments may lead: 4.87 GiB cached > 5 % of the GPU)
        assert "rollout.max_num_seqs" in knobs[:2] and knobs.index("rollout.max_num_seqs") < knobs.index("rollout.gpu_memory_utilization")
