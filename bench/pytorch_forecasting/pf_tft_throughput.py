"""pytorch-forecasting's TFT trained on a qtft bars file, for a side-by-side throughput figure.

Run by compare_throughput.sh (which installs pytorch-forecasting into a scratch venv); not
part of qtft's tests. It builds the inputs qtft builds from the same bars (DATA.md):

  target             log_return, the one-bar log return, normalized per symbol
  observed (past)    log_return, hl_range, close_open, log_volume, bar_gap
  known (all steps)  time of day and day of week, as sine and cosine
  static             symbol
  declared           configuration W (--config wide): the columns named by --observed and
                     --known (globs, as qtft's flags), added to the observed and known inputs

and times training steps (forward, quantile loss, backward, Adam) with a Lightning
callback, from the start of a batch to its end, after warm-up steps; data loading happens
between batches and is reported apart.
"""

import argparse
import fnmatch
import json
import math
import time

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import torch

import lightning.pytorch as pl
from pytorch_forecasting import TemporalFusionTransformer, TimeSeriesDataSet
from pytorch_forecasting.data import GroupNormalizer
from pytorch_forecasting.metrics import QuantileLoss

CONFIGS = {  # as bench/bench_configs.h
    "paper": dict(encoder=168, horizon=24, hidden=160, heads=4, batch=64),
    "small": dict(encoder=64, horizon=8, hidden=64, heads=4, batch=64),
    "wide": dict(encoder=168, horizon=24, hidden=160, heads=4, batch=32),
}
OBSERVED = ["log_return", "hl_range", "close_open", "log_volume", "bar_gap"]
KNOWN = ["time_of_day_sin", "time_of_day_cos", "day_of_week_sin", "day_of_week_cos"]


def expand(patterns, columns):
    """Columns matching the comma-separated globs, in file order per pattern, as qtft reads them."""
    names = []
    for pattern in (p for item in patterns for p in item.split(",") if p):
        matched = [c for c in columns if fnmatch.fnmatchcase(c, pattern) and c not in names]
        if not matched:
            raise SystemExit(f"{pattern}: no column matches")
        names += matched
    return names


def features(path, declared):
    bars = pq.read_table(path).to_pandas()
    frames = []
    for symbol, s in bars.groupby("symbol", sort=False):
        s = s.sort_values("timestamp").reset_index(drop=True)
        ns = s["timestamp"].astype("int64").to_numpy()
        f = pd.DataFrame(index=s.index)
        f["symbol"] = str(symbol)
        f["log_return"] = np.log(s["close"] / s["close"].shift(1))
        f["hl_range"] = np.log(s["high"] / s["low"])
        f["close_open"] = np.log(s["close"] / s["open"])
        f["log_volume"] = np.log1p(s["volume"])
        f["bar_gap"] = np.log1p(np.diff(ns, prepend=ns[0]) / 60e9)
        seconds = ns / 1e9
        day = (seconds % 86400) / 86400
        week = ((seconds / 86400 + 3) % 7) / 7  # 1970-01-01 was a Thursday
        f["time_of_day_sin"], f["time_of_day_cos"] = np.sin(2 * math.pi * day), np.cos(2 * math.pi * day)
        f["day_of_week_sin"], f["day_of_week_cos"] = np.sin(2 * math.pi * week), np.cos(2 * math.pi * week)
        for column in declared:
            f[column] = s[column].astype("float32")
        f = f.iloc[1:].reset_index(drop=True)
        f["time_idx"] = np.arange(len(f))
        train_rows = int(len(f) * 0.7)  # qtft's training split
        frames.append(f.iloc[:train_rows])
    data = pd.concat(frames, ignore_index=True)
    data["symbol"] = data["symbol"].astype("category")
    return data


class StepTimer(pl.Callback):
    def __init__(self, warmup, steps):
        self.warmup, self.steps = warmup, steps
        self.step_seconds, self.between_seconds = [], []
        self._start = self._end = None

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        now = time.perf_counter()
        if self._end is not None and batch_idx > self.warmup:
            self.between_seconds.append(now - self._end)
        self._start = now

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self._end = time.perf_counter()
        if batch_idx >= self.warmup:
            self.step_seconds.append(self._end - self._start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parquet-file", required=True)
    parser.add_argument("--config", choices=sorted(CONFIGS), required=True)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--observed", action="append", default=[], help="declared observed columns (globs)")
    parser.add_argument("--known", action="append", default=[], help="declared known columns (globs)")
    parser.add_argument("--hidden-continuous-size", type=int, default=0,
                        help="width of each real input (0: the hidden size, as qtft below 32 inputs)")
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    c = CONFIGS[args.config]

    columns = pq.read_schema(args.parquet_file).names
    observed, known = expand(args.observed, columns), expand(args.known, columns)
    data = features(args.parquet_file, observed + known)
    dataset = TimeSeriesDataSet(
        data,
        time_idx="time_idx",
        target="log_return",
        group_ids=["symbol"],
        min_encoder_length=c["encoder"],
        max_encoder_length=c["encoder"],
        min_prediction_length=c["horizon"],
        max_prediction_length=c["horizon"],
        static_categoricals=["symbol"],
        time_varying_known_reals=KNOWN + known,
        time_varying_unknown_reals=OBSERVED + observed,
        target_normalizer=GroupNormalizer(groups=["symbol"]),
        add_relative_time_idx=False,
        add_target_scales=False,
        add_encoder_length=False,
    )
    loader = dataset.to_dataloader(train=True, batch_size=c["batch"], num_workers=0)
    model = TemporalFusionTransformer.from_dataset(
        dataset,
        hidden_size=c["hidden"],
        attention_head_size=c["heads"],
        # qtft's --variable-hidden-size: each real input's embedding and GRN width
        hidden_continuous_size=args.hidden_continuous_size or c["hidden"],
        dropout=0.1,
        lstm_layers=1,
        output_size=3,
        loss=QuantileLoss([0.1, 0.5, 0.9]),
        learning_rate=1e-3,
        optimizer="adam",
        logging_metrics=torch.nn.ModuleList([]),
        log_interval=-1,
    )
    timer = StepTimer(args.warmup, args.steps)
    trainer = pl.Trainer(
        accelerator="cpu",
        max_steps=args.warmup + args.steps,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        callbacks=[timer],
    )
    trainer.fit(model, train_dataloaders=loader)

    step = sum(timer.step_seconds) / len(timer.step_seconds)
    between = sum(timer.between_seconds) / max(1, len(timer.between_seconds))
    result = {
        "tool": "pytorch-forecasting",
        "config": args.config,
        "threads": torch.get_num_threads(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "observed_inputs": len(OBSERVED + observed),
        "known_inputs": len(KNOWN + known),
        "hidden_continuous_size": args.hidden_continuous_size or c["hidden"],
        "steps": len(timer.step_seconds),
        "step_seconds": step,
        "samples_per_second": c["batch"] / step,
        "data_loading_seconds_per_batch": between,
    }
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=2)


if __name__ == "__main__":
    main()
