#!/usr/bin/env python3
"""Tests of the Python helpers in experiments/ (standard library only; scripts/test.sh runs them):
gains.py reads the learned gains of a checkpoint and refuses a malformed one with an error that
names the file; summarize.py names the file and line of a malformed record and says what one
run per mode can and cannot tell; lengths.py tabulates hypothesis / reference length; overlay.py
draws several runs' curves on one set of axes; lr_sensitivity.py computes Wortsman's LR
sensitivity from a sweep's records and draws its pictures.

    python3 -m unittest tests/test_experiment_helpers.py    (from the repository root)
"""
import importlib.util
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GAINS = os.path.join(ROOT, "experiments", "gains.py")
LENGTHS = os.path.join(ROOT, "experiments", "lengths.py")
OVERLAY = os.path.join(ROOT, "experiments", "overlay.py")
SUMMARIZE = os.path.join(ROOT, "experiments", "summarize.py")
LR_SENSITIVITY = os.path.join(ROOT, "experiments", "lr_sensitivity.py")


def run(*args):
    """(exit status, stdout, stderr) of a helper run with python3."""
    p = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def safetensors_bytes(tensors, header_edit=None):
    """A safetensors file of F32 tensors {name: (shape, values)}; header_edit may spoil the header."""
    header, data = {}, b""
    for name, (shape, values) in tensors.items():
        raw = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if header_edit:
        header_edit(header)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


class GainsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.best = os.path.join(self.dir.name, "checkpoints", "best")
        os.makedirs(self.best)

    def tearDown(self):
        self.dir.cleanup()

    def write(self, blob):
        with open(os.path.join(self.best, "model.safetensors"), "wb") as f:
            f.write(blob)

    def gains(self):
        return run(GAINS, self.dir.name)

    def test_reads_g_and_per_dimension_gains(self):
        self.write(safetensors_bytes({
            "encoder.layers.0.self_attn.g": ([], [12.5]),
            "decoder.layers.0.self_attn.g": ([2], [3.0, 4.0]),  # per-head g: every head is shown
            "encoder.layers.1.self_attn.q_norm.gamma": ([4], [1.0, 2.0, 1.0, 2.0]),
            "encoder.layers.1.self_attn.k_norm.gamma": ([4], [1.0, 2.0, 1.0, 2.0]),
            "encoder.layers.1.self_attn.q_norm.beta": ([4], [0.5, -0.25, 0.0, 0.0]),
            "encoder.layers.1.self_attn.k_norm.beta": ([4], [0.0, 0.0, 0.0, -0.125]),
        }))
        rc, out, err = self.gains()
        self.assertEqual(rc, 0, err)
        self.assertIn("decoder.layers.0.self_attn: g 3.000 4.000", out)
        self.assertIn("encoder.layers.0.self_attn: g 12.500", out)
        # γ_q⊙γ_k = [1, 4, 1, 4]: mean 2.5, √4·2.5 = 5.
        self.assertIn("encoder.layers.1.self_attn: γ_q⊙γ_k min 1.000 mean 2.500 max 4.000 (√d·mean 5.00)", out)
        self.assertIn("max|β_q| 0.500, max|β_k| 0.1250", out)

    def test_scaled_dot_has_no_gains(self):
        self.write(safetensors_bytes({"encoder.layers.0.norm1.gamma": ([2], [1.0, 1.0])}))
        rc, out, _ = self.gains()
        self.assertEqual(rc, 0)
        self.assertIn("no learned attention gains", out)

    def assertRefused(self, *fragments):
        rc, out, err = self.gains()
        self.assertNotEqual(rc, 0, out)
        self.assertNotIn("Traceback", err)
        self.assertIn("model.safetensors", err)
        for fragment in fragments:
            self.assertIn(fragment, err)

    def test_missing_checkpoint(self):
        self.assertRefused("not found")

    def test_truncated_file(self):
        self.write(b"\x10\x00")
        self.assertRefused("too short")

    def test_header_past_the_end(self):
        self.write(safetensors_bytes({"a.g": ([], [1.0])})[:20])
        self.assertRefused("runs past the end")

    def test_header_not_json(self):
        self.write(struct.pack("<Q", 5) + b"{oops")
        self.assertRefused("not JSON")

    def test_offsets_outside_the_data(self):
        def spoil(header):
            header["encoder.layers.0.self_attn.g"]["data_offsets"] = [0, 400]
        self.write(safetensors_bytes({"encoder.layers.0.self_attn.g": ([], [1.0])}, spoil))
        self.assertRefused("encoder.layers.0.self_attn.g", "data_offsets")

    def test_key_gain_missing(self):
        self.write(safetensors_bytes({"m.q_norm.gamma": ([2], [1.0, 1.0])}))
        self.assertRefused("m.k_norm.gamma is missing")

    def test_gains_of_unequal_size(self):
        self.write(safetensors_bytes({"m.q_norm.gamma": ([2], [1.0, 1.0]), "m.k_norm.gamma": ([3], [1.0] * 3)}))
        self.assertRefused("has 2 values but m.k_norm.gamma has 3")


def load_summarize():
    spec = importlib.util.spec_from_file_location("summarize", SUMMARIZE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class SummarizeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.summarize = load_summarize()

    def tearDown(self):
        self.dir.cleanup()

    def record(self, entry, test, metrics):
        path = os.path.join(self.dir.name, entry)
        os.makedirs(path)
        with open(os.path.join(path, "test.json"), "w") as f:
            f.write(test)
        with open(os.path.join(path, "metrics.jsonl"), "w") as f:
            f.write(metrics)
        return path

    def test_one_run_each_claims_no_spread(self):
        text = self.summarize.qknorm_verdict([8.73], [8.52])
        self.assertIn("+0.21 BLEU", text)
        self.assertIn("one run of each", text)
        self.assertNotIn("every QKNorm run", text)

    def test_verdicts_with_seeds(self):
        self.assertIn("every QKNorm run scores above", self.summarize.qknorm_verdict([8.0, 8.2], [7.4, 7.6]))
        self.assertIn("every scaled dot-product run scores above", self.summarize.qknorm_verdict([7.0], [7.4, 7.6]))
        overlap = self.summarize.qknorm_verdict([7.0, 8.0], [7.4, 7.6])
        self.assertIn("overlap", overlap)
        self.assertIn("spread between seeds of one mode is 1.00 BLEU", overlap)

    def test_table_from_records(self):
        log = '{"step": 50, "epoch": 1, "train_loss": 5.0, "elapsed_s": 30, "g": {"m.g": 12.9}}\n'
        self.record("qknorm-seed1", '{"bleu": 9.5, "chrf": 30.25}',
                    log + '{"step": 100, "dev_bleu": 10.5, "elapsed_s": 60}\n')
        self.record("scaled_dot-seed1", '{"bleu": 9.0, "chrf": 30.0}', '{"step": 100, "dev_bleu": 10.0, "elapsed_s": 60}\n')
        rc, out, err = run(SUMMARIZE, self.dir.name, "toy")
        self.assertEqual(rc, 0, err)
        self.assertIn("| qknorm | 1 | 9.50 | n/a | 30.2 | 10.50 | 1 | 100 | 1 min |", out)
        self.assertIn("**+0.50 BLEU**, one run of each", out)

    def test_brevity_penalty_and_retokenised_bleu(self):
        line = "BLEU = 9.50 40.5/14.6/6.1/2.6 (BP = 0.889 ratio = 0.895 hyp_len = 20725 ref_len = 23157)"
        self.record("qknorm-seed1", json.dumps({"bleu": 9.5, "chrf": 30.25, "bleu_line": line, "bleu_13a": 14.25}),
                    '{"step": 100, "dev_bleu": 10.5, "elapsed_s": 60}\n')
        self.record("scaled_dot-seed1", '{"bleu": 9.0, "chrf": 30.0}', '{"step": 100, "dev_bleu": 10.0, "elapsed_s": 60}\n')
        rc, out, err = run(SUMMARIZE, self.dir.name, "toy")
        self.assertEqual(rc, 0, err)
        self.assertIn("| test BLEU | BP | BLEU, 13a re-tokenised | chrF |", out)
        self.assertIn("| qknorm | 1 | 9.50 | 0.889 | 14.25 | 30.2 |", out)
        self.assertIn("| scaled_dot | 1 | 9.00 | n/a | n/a | 30.0 |", out)  # an older record: neither

    def test_by_step_columns(self):
        short = [("qknorm", 1, {"evals": [(600, 2.0), (1200, 6.0), (1800, 12.0), (2400, 13.0)]})]
        self.assertEqual(self.summarize.column_steps(short), [600, 1200, 1800, 2400])
        long = [("qknorm", 1, {"evals": [(t, 1.0) for t in range(500, 24001, 500)]})]
        self.assertEqual(self.summarize.column_steps(long), list(range(4000, 24001, 4000)))
        longer = [("qknorm", 1, {"evals": [(t, 1.0) for t in range(1000, 100001, 1000)]})]
        self.assertLessEqual(len(self.summarize.column_steps(longer)), 16)

    def test_short_run_has_a_by_step_table(self):
        self.record("qknorm-seed1", '{"bleu": 9.5, "chrf": 30.0}',
                    '{"step": 600, "dev_bleu": 2.5}\n{"step": 1200, "dev_bleu": 6.25}\n')
        rc, out, err = run(SUMMARIZE, self.dir.name, "toy")
        self.assertEqual(rc, 0, err)
        self.assertIn("| attention | seed | 600 | 1,200 |", out)
        self.assertIn("| qknorm | 1 | 2.50 | 6.25 |", out)

    def test_malformed_metrics_line_is_named(self):
        self.record("qknorm-seed1", '{"bleu": 9.5, "chrf": 30.0}', '{"step": 100, "dev_bleu": 10.5}\n{"step": 2\n')
        rc, _, err = run(SUMMARIZE, self.dir.name, "toy")
        self.assertNotEqual(rc, 0)
        self.assertNotIn("Traceback", err)
        self.assertIn(os.path.join("qknorm-seed1", "metrics.jsonl") + ":2: not a JSON line", err)

    def test_test_json_without_bleu_is_named(self):
        self.record("qknorm-seed1", '{"chrf": 30.0}', '{"step": 100, "dev_bleu": 10.5}\n')
        rc, _, err = run(SUMMARIZE, self.dir.name, "toy")
        self.assertNotEqual(rc, 0)
        self.assertNotIn("Traceback", err)
        self.assertIn("test.json: has no number 'bleu'", err)

    def test_no_runs(self):
        rc, _, err = run(SUMMARIZE, self.dir.name, "toy")
        self.assertNotEqual(rc, 0)
        self.assertIn("no finished runs", err)


class OverlayTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def record(self, name, lines):
        path = os.path.join(self.dir.name, name)
        os.makedirs(path)
        with open(os.path.join(path, "metrics.jsonl"), "w") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))
        return path

    def test_one_curve_per_run(self):
        log = {"step": 50, "train_loss": 5.0}
        a = self.record("f32/qknorm-seed1", [log, {"step": 100, "dev_loss": 3.0}, {"step": 200, "dev_loss": 2.5}])
        b = self.record("bf16/qknorm-seed1", [log, {"step": 100, "dev_loss": 3.1}, {"step": 200, "dev_loss": 2.4}])
        rc, out, err = run(OVERLAY, a, b)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.count("<polyline"), 2)
        self.assertIn("f32/qknorm-seed1", out)
        self.assertIn("bf16/qknorm-seed1", out)
        polylines = [l for l in out.splitlines() if l.startswith("<polyline")]
        self.assertTrue(all(l.split('points="')[1].split('"')[0].count(",") == 2 for l in polylines))
        self.assertNotEqual(polylines[0].split('stroke="')[1][:7], polylines[1].split('stroke="')[1][:7])

    def test_a_metric_never_logged_is_named(self):
        a = self.record("f32/qknorm-seed1", [{"step": 50, "train_loss": 5.0}])
        rc, _, err = run(OVERLAY, "--metric", "dev_bleu", a)
        self.assertNotEqual(rc, 0)
        self.assertNotIn("Traceback", err)
        self.assertIn("logs no 'dev_bleu'", err)

    def test_malformed_line_is_named(self):
        a = self.record("f32/qknorm-seed1", [{"step": 50, "dev_loss": 5.0}])
        with open(os.path.join(a, "metrics.jsonl"), "a") as f:
            f.write('{"step": 1\n')
        rc, _, err = run(OVERLAY, a)
        self.assertNotEqual(rc, 0)
        self.assertIn("metrics.jsonl:2: not a JSON line", err)


class LengthsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, lines):
        path = os.path.join(self.dir.name, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
        return path

    def test_ratios_by_reference_length(self):
        ref = self.write("test.en", ["a b c", "a " * 11 + "z", "w " * 59 + "z"])  # 3, 12 and 60 tokens
        hyp = self.write("qknorm-seed1/test.hyp", ["a b c d", "a " * 5 + "z", "w " * 29 + "z"])  # 4, 6, 30
        rc, out, err = run(LENGTHS, ref, hyp)
        self.assertEqual(rc, 0, err)
        self.assertIn("| reference length (tokens) | segments | qknorm-seed1 |", out)
        self.assertIn("| 0–9 | 1 | 1.33 |", out)
        self.assertIn("| 10–19 | 1 | 0.50 |", out)
        self.assertNotIn("| 20–29 |", out)  # an empty bucket has no row
        self.assertIn("| 50+ | 1 | 0.50 |", out)
        self.assertIn("| all | 3 | 0.53 |", out)  # 40 / 75
        self.assertIn("| hypotheses under half their reference | | 0 |", out)  # 6 of 12 is half, not under

    def test_refuses_a_hypothesis_file_of_another_length(self):
        ref = self.write("test.en", ["a", "b"])
        hyp = self.write("run/test.hyp", ["a"])
        rc, _, err = run(LENGTHS, ref, hyp)
        self.assertNotEqual(rc, 0)
        self.assertNotIn("Traceback", err)
        self.assertIn("has 1 lines but", err)

    def test_missing_file(self):
        rc, _, err = run(LENGTHS, os.path.join(self.dir.name, "nope.en"), os.path.join(self.dir.name, "nope.hyp"))
        self.assertNotEqual(rc, 0)
        self.assertIn("nope.en: No such file", err)



class LrSensitivityTest(unittest.TestCase):
    """experiments/lr_sensitivity.py on records written here: two modes, three learning rates."""

    def record(self, root, mode, lr, seed, final_loss, diverged=None, logits=(3.0, 5.0)):
        path = os.path.join(root, f"{mode}-lr{lr}-seed{seed}")
        os.makedirs(path)
        with open(os.path.join(path, "outcome.json"), "w") as f:
            json.dump({"mode": mode, "lr": lr, "seed": seed, "diverged_at_step": diverged}, f)
        with open(os.path.join(path, "metrics.jsonl"), "w") as f:
            for step, logit in zip((10, 20), logits):
                loss = 9.0 if diverged is not None and step == 20 else 2.0  # a spike above ln 256 before the end
                f.write(json.dumps({"step": step, "train_loss": loss, "attn_max_logit": {"block 0": logit, "block 1": 1.0},
                                    "attn_entropy": {"block 0": 1.5, "block 1": 2.5}}) + "\n")
            if diverged is None:
                f.write(json.dumps({"step": 20, "dev_loss": final_loss}) + "\n")

    def test_sensitivity_table_and_pictures(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "sweep")
            # scaled_dot: 2.0 at the best lr, 2.6 at another, diverged at the third (counted at ln 256).
            self.record(root, "scaled_dot", "1e-3", 1, 2.6)
            self.record(root, "scaled_dot", "1e-2", 1, 2.0)
            self.record(root, "scaled_dot", "0.1", 1, None, diverged=57, logits=(40.0, 900.0))
            # qknorm: two seeds, averaged per lr before the best is taken.
            for seed, losses in ((1, (2.2, 2.0, 2.3)), (2, (2.4, 2.2, 2.1))):
                for lr, loss in zip(("1e-3", "1e-2", "0.1"), losses):
                    self.record(root, "qknorm", lr, seed, loss)
            status, out, err = run(LR_SENSITIVITY, root)
            self.assertEqual(status, 0, err)
            with open(os.path.join(tmp, "sweep.md")) as f:
                table = f.read()
            l0 = math.log(256)
            expected_scaled = ((2.6 - 2.0) + 0 + (l0 - 2.0)) / 3
            self.assertIn(f"| scaled_dot | {expected_scaled:.3f} | 0.01 | 2.000 | 1 of 3 | 1 of 3 |", table)
            self.assertIn(f"| qknorm | {((2.3 - 2.1) + 0 + (2.2 - 2.1)) / 3:.3f} | 0.01 | 2.100 | 0 of 6 | 0 of 6 |", table)
            self.assertIn("| scaled_dot | 0.1 | 1 | — | 57 | 20 | 9.00 | 900.0, 1.0 | 1.50, 2.50 |", table)
            self.assertIn("| scaled_dot | 0.001 | 1 | 2.600 | — | — | 2.00 |", table)
            for picture in ("sweep-loss.svg", "sweep-logits.svg"):
                with open(os.path.join(tmp, picture)) as f:
                    self.assertTrue(f.read().startswith("<svg"))
            # --out: the same files elsewhere, byte for byte.
            other = os.path.join(tmp, "other")
            os.makedirs(other)
            self.assertEqual(run(LR_SENSITIVITY, root, "--out", other)[0], 0)
            with open(os.path.join(other, "sweep.md")) as f:
                self.assertEqual(f.read(), table)

    def test_no_records(self):
        with tempfile.TemporaryDirectory() as tmp:
            status, _, err = run(LR_SENSITIVITY, tmp)
            self.assertNotEqual(status, 0)
            self.assertIn("holds no records", err)


if __name__ == "__main__":
    unittest.main()
