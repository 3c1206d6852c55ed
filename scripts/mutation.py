"""Mutation testing of Parley's promise-holding modules with cosmic-ray (run by scripts/mutation).

Each module is mutated in a copy of the repository (never in the work tree), and the copy is
what every test imports: pytest in-process and `parley serve` started as a subprocess, through
PYTHONPATH. Cosmic-ray writes one mutant at a time to the copy's file on disk and runs the
paired tests (`-x`: the first failure kills the mutant); a run longer than the timeout counts
as timed out. Results per module: mutation-results/<module>.sqlite, and the survivors' diffs
in mutation-results/<module>.survivors.txt (what docs/testing.md calls equivalent, or kills).
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "mutation-results"
# Where each module's copy is made: the same place every run, since the session database
# names the mutated file by its path (`--survivors` runs the survivors again there).
WORK = Path(os.environ.get("TMPDIR", "/tmp")) / "parley-mutation"

# Module (under server/parley/) -> the fast tests that cover it, cheapest modules first.
# In-process tests where they hold a rule as well as a subprocess test does; the subprocess
# tests (`parley serve` over JSON-RPC) where the rule lives in the running server.
MODULE_TESTS: dict[str, list[str]] = {
    "agent/budgets.py": [
        "tests/models/test_budget_rules.py",
        "tests/models/test_budgets.py",
    ],
    "core/usage.py": [
        "tests/models/test_usage_and_cost.py",
        "tests/models/test_caching.py",
    ],
    # In-process: the same rules through the running server (test_server_robustness.py's
    # oversized-frame and resynchronising tests) double the time of every surviving mutant.
    "protocol/framing.py": [
        "tests/protocol/test_framing_rules.py",
        "tests/protocol/test_frame_writer.py",
    ],
    "tools/command_rules.py": ["tests/trust/test_command_rules.py"],
    # The sandbox's policy and launcher: every place planted and tried from a real child.
    "child_env.py": ["tests/trust/test_sandbox_policy.py"],
    "sandbox_policy.py": [
        "tests/trust/test_sandbox_policy.py",
        "tests/trust/test_trust_attacks.py",
    ],
    # The launcher's mounts and fallback: the red team's renames, test_sandbox.py's launch
    # property and fallback (through the server: half a minute a survivor).
    "sandbox.py": [
        "tests/trust/test_sandbox_policy.py",
        "tests/trust/test_red36_sandbox_escapes.py",
        "tests/trust/test_sandbox.py",
    ],
    "tools/command_policy.py": ["tests/trust/test_command_rules.py"],
    "tools/command_output.py": ["tests/tools/test_command_output.py"],
    "tools/confined.py": [
        "tests/trust/test_confined_paths.py",
        "tests/trust/test_path_gate.py",
        "tests/trust/test_roots_gate.py",
    ],
    # In-process only: the server tests of compaction (test_compaction.py, test_history.py)
    # and of checkpoints (test_checkpoints.py) take a minute or more for every survivor.
    "agent/compaction.py": [
        "tests/models/test_compaction_rules.py",
        "tests/models/test_compactor_rules.py",
    ],
    "agent/checkpoints.py": [
        "tests/tools/test_checkpoint_rules.py",
    ],
    "agent/compactor.py": [
        "tests/models/test_compactor_rules.py",
    ],
    "agent/call_usage.py": [
        "tests/models/test_compactor_rules.py",
    ],
    # A continued call reconciled with the streamed text (issue 23), in-process; the real
    # llama.cpp server's tool rounds (test_llamacpp_real.py) hold the same rules end to end.
    "providers/continuation.py": [
        "tests/models/test_continuation_reconcile.py",
        "tests/models/test_continued_call.py",
    ],
    "agent/continued_call.py": [
        "tests/models/test_continued_call.py",
        "tests/models/test_continuation.py",
    ],
    # The turn loop's accounting, budget and permission rules, through the running server
    # (the whole of test_server_hybrid, test_caching and test_edit_tools takes minutes).
    # Not test_caching's discarded-stream test: under load the stream may end before the
    # hang-up it checks for, which fails it without a mutant.
    "agent/turn.py": [
        f"tests/models/test_server_hybrid.py::{name}"
        for name in (
            "test_a_finish_reason_only_round_counts_the_synchronous_call_not_the_full_stream",
            "test_tool_round_one_early_closed_stream_one_sync_call",
            "test_sync_policy_never_streams",
            "test_stream_policy_assembles_tool_calls_from_the_stream",
        )
    ]
    + [
        f"tests/models/test_caching.py::{name}"
        for name in (
            "test_anthropic_cache_usage_is_counted_and_priced",
            "test_openai_synchronous_call_cache_usage_is_counted",
        )
    ]
    + [
        f"tests/models/test_budgets.py::{name}"
        for name in (
            "test_a_turn_past_the_session_budget_does_not_call_the_provider",
            "test_the_day_budget_counts_every_session",
            "test_a_turn_that_crosses_the_budget_stops_after_the_round",
            "test_calls_of_unknown_price_never_block",
            "test_a_summary_that_crosses_the_budget_stops_the_turn_before_its_round",
        )
    ]
    + [
        "tests/models/test_learned_windows.py::"
        "test_a_learned_window_wins_over_the_built_in_one_of_the_models_name",
        "tests/models/test_text_tools.py::test_ollama_stream_with_role_on_every_chunk_and_no_usage",
        "tests/protocol/test_acp_conformance.py::"
        "test_usage_update_reports_the_context_the_window_and_the_cost",
        "tests/models/test_continuation.py::"
        "test_each_preset_continues_the_streamed_text_in_its_servers_form",
        "tests/models/test_stop_text.py",
        "tests/models/test_wasted_tokens.py",
    ]
    + [
        f"tests/models/test_server_hybrid.py::{name}"
        for name in (
            "test_permission_asked_and_allowed_always_is_remembered",
            "test_rejected_call_does_not_run_and_the_model_is_told",
            "test_auto_approve_runs_eval_without_asking",
        )
    ]
    + [
        f"tests/protocol/test_server_robustness.py::{name}"
        for name in (
            "test_a_malformed_answer_to_the_servers_own_request_is_a_rejection",
            "test_unknown_tool_and_bad_arguments_go_back_to_the_model",
            "test_editor_tool_error_reaches_the_model",
        )
    ],
}

# The tests of a few functions, fewer than their module's (`MODULE::F1,F2` runs these when
# every function named has them): the turn's permission path, through the running server.
PERMISSION_TESTS = (
    [
        f"tests/models/test_server_hybrid.py::{name}"
        for name in (
            "test_permission_asked_and_allowed_always_is_remembered",
            "test_rejected_call_does_not_run_and_the_model_is_told",
            "test_auto_approve_runs_eval_without_asking",
        )
    ]
    + [
        f"tests/protocol/test_server_robustness.py::{name}"
        for name in (
            "test_a_malformed_answer_to_the_servers_own_request_is_a_rejection",
            "test_unknown_tool_and_bad_arguments_go_back_to_the_model",
            "test_editor_tool_error_reaches_the_model",
        )
    ]
    + [
        "tests/tools/test_edit_tools.py::test_missing_and_ambiguous_old_text_come_back_as_errors_the_model_"
        "can_act_on",
        "tests/models/test_text_tools.py::test_a_malformed_call_goes_back_to_the_model_as_an_error",
        "tests/tools/test_checkpoints.py::test_a_turn_of_the_edit_tools_is_undone_after_a_restart",
    ]
)
# Where the permission decision lives since issue 25 (agent/tool_permission.py): the same
# tests, the commands' prefix rules and the `cancelled` answer.
MODULE_TESTS["agent/tool_permission.py"] = [
    "tests/trust/test_tool_permission_rules.py",
    "tests/trust/test_mode_table.py",  # its in-process tests first: most mutants die in a second
    *PERMISSION_TESTS,
    "tests/trust/test_command_permission.py",
    "tests/trust/test_permission_cancelled.py",
    "tests/trust/test_modes.py::test_accept_edits_applies_an_edit_unasked_undo_restores_it_and_eval_still_asks",
]
# The modes (issue 44): every tool in every mode against a hand-written table, in-process (a
# second), then over the wire; then the modes' own tests (12 s: the state sent, the plan, a reload).
MODULE_TESTS["agent/modes.py"] = ["tests/trust/test_mode_table.py", "tests/trust/test_modes.py"]

# A retry replacing a cut-off turn (issue 26): the store's and the session's side, in process
# (their functions only: `store.py::drop_turn,…`); the decision, through the server.
RETRY_RULES = ["tests/models/test_retry_rules.py"]
RETRY_TESTS = ["tests/models/test_retry_replaces.py"]
MODULE_TESTS["store.py"] = [*RETRY_RULES, "tests/models/test_history.py"]
MODULE_TESTS["agent/session.py"] = [*RETRY_RULES, "tests/models/test_history.py"]
MODULE_TESTS["agent/sessions.py"] = [*RETRY_TESTS, "tests/protocol/test_catch_up.py"]
# The snapshots `/undo` restores (issue 40), in-process on real trees: the collection's rules
# (not its test over the wire, which deletes a session through the server), the walk's
# equivalence to a fresh snapshot, snapshot-then-restore byte for byte.
SNAPSHOT_GC_RULES = [
    f"tests/tools/test_snapshot_gc.py::{name}"
    for name in (
        "test_nothing_is_collected_while_a_snapshot_or_restore_holds_the_store",
        "test_records_past_the_retention_go_and_their_content_with_them",
        "test_an_unreadable_manifest_keeps_every_object",
        "test_after_collection_every_remaining_record_restores_byte_for_byte",
        "test_a_home_without_snapshots_is_left_as_it_is",
        "test_an_unreadable_record_keeps_everything",
        "test_every_unnamed_object_goes_and_every_named_one_stays",
        "test_a_collection_asked_for_twice_runs_once_off_the_loop",
        "test_a_record_an_undo_dropped_no_longer_keeps_its_content",
        "test_a_collection_that_fails_says_so_and_raises_nothing",
    )
]
SNAPSHOT_TESTS = [
    "tests/tools/test_snapshot_store.py",
    "tests/tools/test_snapshot_walk.py",
    "tests/tools/test_snapshots.py",
]
MODULE_TESTS["agent/snapshot_gc.py"] = SNAPSHOT_GC_RULES
MODULE_TESTS["agent/snapshot_store.py"] = [*SNAPSHOT_TESTS[:1], *SNAPSHOT_GC_RULES, *SNAPSHOT_TESTS]
MODULE_TESTS["agent/snapshots.py"] = [*SNAPSHOT_TESTS, *SNAPSHOT_GC_RULES]

FUNCTION_TESTS: dict[tuple[str, str], list[str]] = {
    ("agent/turn.py", "_run_tool"): PERMISSION_TESTS,
    ("agent/turn.py", "_ask_permission"): PERMISSION_TESTS,
    **{("store.py", name): RETRY_RULES for name in ("take_cut_off", "drop_turn", "rewrites")},
    **{("agent/session.py", name): RETRY_RULES for name in ("drop_last_turn", "catch_up")},
    # Which root's command rules apply (issue 36), in-process.
    ("agent/tool_permission.py", "command_root"): ["tests/trust/test_tool_permission_rules.py"],
    **{
        ("agent/sessions.py", name): RETRY_TESTS for name in ("prompt", "_run_turn", "_same_prompt")
    },
}

# What a module's tests need set: fewer examples for the gate's property tests (2,000 by
# default), which still send every kind of hostile path.
MODULE_ENV: dict[str, dict[str, str]] = {
    "tools/confined.py": {"GATE_EXAMPLES": "200"},
}

# Data, not rules: the list prices are checked once each against the providers' published
# ones (test_usage_and_cost.py); mutating each of their numbers twice adds minutes, no rule.
MODULE_DATA: dict[str, list[str]] = {
    "core/usage.py": ["DEFAULT_PRICES"],
}

# Cosmic-ray replaces each operator by every other one; most of those pairs are noise (`|` in
# the type hints, `a + b` -> `a << b`). Kept: the boundary and negation of each comparison,
# the inverse of each arithmetic operator, and every other kind of mutation (constants,
# `not`, and/or, True/False, break/continue, zero-iteration loops, exceptions, decorators).
# The random variable inserter and replacer are left out: they make a different set each run.
KEPT_OPERATORS = (
    r"core/ReplaceBinaryOperator_(Add_Sub|Sub_Add|Mul_Div|Div_Mul|FloorDiv_Mul|Mod_FloorDiv"
    r"|BitAnd_BitOr)$",
    r"core/ReplaceComparisonOperator_(Eq_NotEq|NotEq_Eq|Lt_LtE|Lt_GtE|LtE_Lt|LtE_Gt|Gt_GtE"
    r"|Gt_LtE|GtE_Gt|GtE_Lt|Is_IsNot|IsNot_Is)$",
    r"core/ReplaceUnaryOperator_(Delete_Not|Delete_USub)$",
    r"core/(AddNot|NumberReplacer|ReplaceTrueWithFalse|ReplaceFalseWithTrue|ReplaceAndWithOr"
    r"|ReplaceOrWithAnd|ReplaceBreakWithContinue|ReplaceContinueWithBreak|ZeroIterationForLoop"
    r"|ExceptionReplacer|RemoveDecorator)$",
)
# cr-filter-operators skips what matches any of these: everything not kept above.
EXCLUDED_OPERATORS = "(?!" + "|".join(f"(?:{kept})" for kept in KEPT_OPERATORS) + ").*"


def copy_repository(work: Path) -> None:
    """The sources and tests, without caches; node_modules linked, not copied."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "node_modules", ".hypothesis")
    shutil.copytree(REPO / "server", work / "server", ignore=ignore)
    shutil.copytree(REPO / "tests", work / "tests", ignore=ignore)
    shutil.copy2(REPO / "pyproject.toml", work / "pyproject.toml")
    modules = REPO / "tests" / "acp-schema" / "node_modules"
    if modules.is_dir():
        (work / "tests" / "acp-schema" / "node_modules").symlink_to(modules)


def test_environment(work: Path, module: str) -> dict[str, str]:
    env = {**os.environ, **MODULE_ENV.get(module, {})}
    env["PYTHONPATH"] = str(work / "server")  # the copy, also in `parley serve` subprocesses
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def pytest_command(tests: list[str]) -> list[str]:
    python = REPO / ".venv" / "bin" / "python"
    return [str(python), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]


def write_config(path: Path, module_path: Path, command: list[str], timeout: float) -> None:
    lines = [
        "[cosmic-ray]",
        f'module-path = "{module_path}"',
        f"timeout = {timeout:.0f}",
        "excluded-modules = []",
        f'test-command = "{" ".join(command)}"',
        "",
        "[cosmic-ray.distributor]",
        'name = "local"',
        "",
        "[cosmic-ray.filters.operators-filter]",
        f"exclude-operators = ['{EXCLUDED_OPERATORS}']",
        "",
    ]
    path.write_text("\n".join(lines))


def cosmic_ray(tool: str, *args: str, cwd: Path, env: dict[str, str]) -> None:
    subprocess.run([str(REPO / ".venv" / "bin" / tool), *args], cwd=cwd, env=env, check=True)


def definition_lines(module_path: Path, names: list[str]) -> set[int]:
    """The lines of the named functions (methods too, by their own name) and module-level
    assignments."""
    lines: set[int] = set()
    found: set[str] = set()
    for node in ast.walk(ast.parse(module_path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in names:
            found.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            assigned = {target.id for target in targets if isinstance(target, ast.Name)}
            if not assigned & set(names):
                continue
            found |= assigned & set(names)
        else:
            continue
        lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    if missing := set(names) - found:
        sys.exit(f"{module_path.name} defines no {', '.join(sorted(missing))}")
    return lines


def skip_mutants(db_path: Path, keep: Callable[[int], bool], why: str) -> None:
    """The mutants on lines `keep` refuses are skipped, like filtered operators (run or not:
    the same mutants count however often the module was run)."""
    skipped = WorkResult(output=why, worker_outcome=WorkerOutcome.SKIPPED)
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        for item in list(db.work_items):
            if not keep(item.mutations[0].start_pos[0]):
                db.set_result(item.job_id, skipped)


def sample_mutants(db_path: Path, every: int) -> None:
    """Of the mutants not yet run, all but every `every`th (in cosmic-ray's order: each
    operator over the module, top to bottom) are skipped: an even sample of a module too
    slow to run whole on a loaded machine. Mutants already run keep their results."""
    skipped = WorkResult(output="Not in the sample", worker_outcome=WorkerOutcome.SKIPPED)
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        results = {item.job_id: result for item, result in db.completed_work_items}
        made = [
            item
            for item in db.work_items
            if item.job_id not in results
            or results[item.job_id].worker_outcome != WorkerOutcome.SKIPPED
        ]
        for index, item in enumerate(made):
            if index % every and item.job_id not in results:
                db.set_result(item.job_id, skipped)


def tally(db_path: Path, survivors_path: Path) -> dict[str, int]:
    """Mutants made (not skipped by the operator filter), killed, survived, timed out."""
    counts = {"made": 0, "killed": 0, "survived": 0, "timed out": 0, "incompetent": 0}
    survivors: list[str] = []
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            counts["made"] += 1
            if result.worker_outcome != WorkerOutcome.NORMAL:
                counts["incompetent"] += 1
            elif result.test_outcome == TestOutcome.SURVIVED:
                counts["survived"] += 1
                mutation = item.mutations[0]
                survivors.append(
                    f"## {item.job_id} {mutation.operator_name} line {mutation.start_pos[0]}\n"
                    f"{result.diff}\n"
                )
            elif result.output == "timeout":
                counts["timed out"] += 1
            else:
                counts["killed"] += 1
    survivors_path.write_text("\n".join(survivors))
    return counts


def run_module(
    module: str, functions: list[str], *, survivors_only: bool, sample: int = 1
) -> dict[str, int]:
    tests = MODULE_TESTS[module]
    if functions and all((module, function) in FUNCTION_TESTS for function in functions):
        tests = list(dict.fromkeys(t for f in functions for t in FUNCTION_TESTS[(module, f)]))
    name = module.replace("/", ".").removesuffix(".py")
    if functions:
        name += "." + "+".join(functions)
    RESULTS.mkdir(exist_ok=True)
    db_path = RESULTS / f"{name}.sqlite"
    config_path = RESULTS / f"{name}.toml"
    work = WORK / name
    module_path = work / "server" / "parley" / module
    if survivors_only and not db_path.exists():
        sys.exit(f"{module}: no earlier run to take the survivors of ({db_path})")
    shutil.rmtree(work, ignore_errors=True)
    copy_repository(work)
    env = test_environment(work, module)
    # Every module but the mutated one compiled once, so each `parley serve` starts fast.
    subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), "-m", "compileall", "-q", "server"],
        cwd=work,
        check=True,
        env={**env, "PYTHONDONTWRITEBYTECODE": ""},
    )
    for stale in (module_path.parent / "__pycache__").glob(f"{module_path.stem}.*.pyc"):
        stale.unlink()
    command = pytest_command(tests)
    started = time.monotonic()
    clean = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    baseline = time.monotonic() - started
    if clean.returncode != 0:
        sys.exit(f"{module}: the tests fail without a mutant:\n{clean.stdout[-3000:]}")
    timeout = max(3 * baseline + 15, 30)
    write_config(config_path, module_path, command, timeout)
    print(f"{module}: tests pass in {baseline:.1f} s; timeout {timeout:.0f} s", flush=True)
    if survivors_only:
        with sqlite3.connect(db_path) as db:  # run again: the tests may have grown since
            db.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED'")
            # Left out of an earlier sample: run now, unless `--sample` leaves them out again.
            db.execute("DELETE FROM work_results WHERE output = 'Not in the sample'")
            db.execute("UPDATE mutation_specs SET module_path = ?", (str(module_path),))
    else:
        db_path.unlink(missing_ok=True)
        cosmic_ray("cosmic-ray", "init", str(config_path), str(db_path), cwd=work, env=env)
        cosmic_ray("cr-filter-operators", str(db_path), str(config_path), cwd=work, env=env)
    if functions:
        inside = definition_lines(module_path, functions)
        skip_mutants(db_path, lambda line: line in inside, "Outside the functions")
    if module in MODULE_DATA:
        data = definition_lines(module_path, MODULE_DATA[module])
        skip_mutants(db_path, lambda line: line not in data, "Data")
    if sample > 1:
        sample_mutants(db_path, sample)
    cosmic_ray("cosmic-ray", "exec", str(config_path), str(db_path), cwd=work, env=env)
    shutil.rmtree(work, ignore_errors=True)
    return tally(db_path, RESULTS / f"{name}.survivors.txt")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "modules",
        nargs="*",
        help="paths under server/parley/ (default: all), each optionally with ::F1,F2 to "
        "mutate only these functions (e.g. agent/turn.py::_count,_streamed_round)",
    )
    parser.add_argument(
        "--survivors",
        action="store_true",
        help="run the last run's survivors again (after adding tests) and any mutant it did "
        "not reach, keeping the rest of its results",
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=1,
        metavar="N",
        help="run only every Nth mutant not yet run (an even sample of a slow module; the "
        "same mutants each time, so give it to --survivors too to keep to the sample)",
    )
    arguments = parser.parse_args()
    targets = arguments.modules or list(MODULE_TESTS)
    rows = []
    for target in targets:
        module, _, names = target.partition("::")
        if module not in MODULE_TESTS:
            sys.exit(f"no tests paired with {module}; known: {', '.join(MODULE_TESTS)}")
        functions = [name for name in names.split(",") if name]
        counts = run_module(
            module, functions, survivors_only=arguments.survivors, sample=arguments.sample
        )
        rows.append((target, counts))
        print(f"{target}: {format_counts(counts)}", flush=True)
    print("\n| module | mutants | killed | survived | timed out | incompetent |")
    print("| --- | --- | --- | --- | --- | --- |")
    for module, c in rows:
        print(
            f"| {module} | {c['made']} | {c['killed']} | {c['survived']} | {c['timed out']} "
            f"| {c['incompetent']} |"
        )


def format_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{value} {key}" for key, value in counts.items())


if __name__ == "__main__":
    main()
