"""A Keras ``fit`` that knows nothing of dfcompass (run under ``dfcompass record``): 6 batches.

python tests/tf_programs/plain_fit.py
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
features = rng.random((48, 16), dtype=np.float32)
labels = rng.integers(0, 4, 48)
model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(32, activation="relu"),
                             tf.keras.layers.Dense(4)])
model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(features, labels, batch_size=8, epochs=1, verbose=0, shuffle=False)
