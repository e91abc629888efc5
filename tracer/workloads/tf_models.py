"""The embedded TensorFlow workload: a small Keras CNN, eager inference then graph-mode training.

A LeNet-like CNN (two conv-relu-maxpool stages, a dense layer, a 10-class head) on random
28x28x1 images, deterministic under ``tf.random.set_seed``. :func:`run` calls the model eagerly
for a few inference steps (every layer's ops run one by one: the eager path Delestrac et al., DSD 2022, measured), then
trains it with ``model.fit`` (Keras runs each step as one ``tf.function``: the graph path).
Recorded, one step per batch:

    python -m tracer.workloads.tf_models --out DIR            # records itself (TFRecorder)
    dfcompass record -o JOB -- python -m tracer.workloads.tf_models   # recorded by dfcompass record

This is a program, not part of the recorder: it imports TensorFlow at module level.
"""

from __future__ import annotations

import argparse
from typing import Any, Sequence

from tracer.verbosity import quiet_tensorflow

quiet_tensorflow()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tracer.ctf import TraceExistsError  # noqa: E402
from tracer.tf_source import TFRecorder, active_recorder  # noqa: E402

CLASSES = 10
IMAGE = (28, 28, 1)


def build_cnn() -> Any:
    layers = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input(IMAGE),
        layers.Conv2D(8, 3, activation="relu", name="conv1"),
        layers.MaxPooling2D(name="pool1"),
        layers.Conv2D(16, 3, activation="relu", name="conv2"),
        layers.MaxPooling2D(name="pool2"),
        layers.Flatten(name="flatten"),
        layers.Dense(32, activation="relu", name="fc1"),
        layers.Dense(CLASSES, name="head"),
    ], name="cnn")
    model.compile(optimizer=tf.keras.optimizers.SGD(0.01),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def build_mlp(width: int = 256) -> Any:
    """A Keras MLP on the flattened images: few, larger ops per step (the CNN has many small ones)."""
    layers = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input(IMAGE),
        layers.Flatten(name="flatten"),
        layers.Dense(width, activation="relu", name="fc1"),
        layers.Dense(width, activation="relu", name="fc2"),
        layers.Dense(CLASSES, name="head"),
    ], name="mlp")
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def run(recorder: TFRecorder | None, steps_infer: int = 2, steps_train: int = 3, batch: int = 32) -> None:
    tf.random.set_seed(0)
    rng = np.random.default_rng(0)
    images = rng.random((batch * steps_train, *IMAGE), dtype=np.float32)
    labels = rng.integers(0, CLASSES, batch * steps_train)
    model = build_cnn()
    for step in range(steps_infer):  # eager: each layer's ops dispatched one by one
        if recorder is not None:
            recorder.begin_step()
        model(images[step * batch:(step + 1) * batch], training=False)
        if recorder is not None:
            recorder.end_step()
    callbacks = [recorder.keras_callback()] if recorder is not None else []
    model.fit(images, labels, batch_size=batch, epochs=1, shuffle=False, verbose=0, callbacks=callbacks)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="record into this trace (without it: run under dfcompass record)")
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--steps-infer", type=int, default=2)
    parser.add_argument("--steps-train", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args(argv)
    sizes = dict(steps_infer=args.steps_infer, steps_train=args.steps_train, batch=args.batch)
    if args.out is None:
        run(active_recorder(), **sizes)
        return 0
    try:
        with TFRecorder(args.out, overwrite=args.overwrite) as recorder:
            run(recorder, **sizes)
    except TraceExistsError as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
