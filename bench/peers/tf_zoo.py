"""Tandem's zoo models (src/nn/zoo.cpp) in TensorFlow 2.15 / Keras 2.15, layer for layer: the
same layers, widths, depths, paddings, activations and batch-normalisation settings,
so model.count_params() equals Tandem's Model::count_params() (both count every weight, the
batch-normalisation moving statistics included). Under the mixed_bfloat16 policy the logits layer
stays float32, as Tandem's zoo does.

Weights, all (trainable), the same in Tandem, these and torch_zoo.py (measured 2026-11-30 with
zoo::build(...).count_params(); tests/bench/peers_parity.cpp checks them on every run, the
transformer at a smaller width and depth):
    mlp          28x28x1, 10 classes                  101,770
    cnn          28x28x1, 10 classes                  121,930
    resnet50     224x224x3, 1000 classes           25,610,152 (25,557,032; the rest are the batch
                                                   normalisation's moving means and variances)
    transformer  bert_base, sequence 128, 2 classes 108,891,650

Imported only after common.limit_threads_env: TensorFlow reads the thread variables on import.
"""

import tensorflow as tf

layers = tf.keras.layers


def logits(num_classes):
    """Tandem's zoo logits: float32 under a mixed-precision policy, so the softmax and the loss
    see full-precision logits."""
    mixed = tf.keras.mixed_precision.global_policy().compute_dtype != "float32"
    return layers.Dense(num_classes, dtype="float32" if mixed else None)


def mlp(input_shape, num_classes):
    return tf.keras.Sequential(
        [
            layers.Input(shape=input_shape),
            layers.Flatten(),
            layers.Dense(128, activation="relu"),
            logits(num_classes),
        ],
        name="mlp",
    )


def cnn(input_shape, num_classes):
    """The TensorFlow CNN tutorial, as Tandem's "cnn" and main job."""
    return tf.keras.Sequential(
        [
            layers.Input(shape=input_shape),  # (B, 28, 28, 1) at the default size
            layers.Conv2D(32, 3, activation="relu"),  # (B, 26, 26, 32)
            layers.MaxPooling2D(2),  # (B, 13, 13, 32)
            layers.Conv2D(64, 3, activation="relu"),  # (B, 11, 11, 64)
            layers.MaxPooling2D(2),  # (B, 5, 5, 64)
            layers.Flatten(),  # (B, 1600)
            layers.Dense(64, activation="relu"),
            logits(num_classes),
        ],
        name="cnn",
    )


def conv_for_batch_norm(filters, kernel_size, stride):
    """A bias-free "same" convolution: the BatchNormalization after it supplies the offset."""
    return layers.Conv2D(filters, kernel_size, strides=stride, padding="same", use_bias=False)


def batch_norm(x):
    """ResNet-50's batch normalisation: TensorFlow's official model's momentum and epsilon."""
    return layers.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)


def bottleneck(x, filters, stride):
    """The v1.5 bottleneck: 1x1 reduce, 3x3 carrying the stride, 1x1 expand to 4 x filters; the
    shortcut projected (1x1, strided) when the shape changes."""
    y = layers.Activation("relu")(batch_norm(conv_for_batch_norm(filters, 1, 1)(x)))
    y = layers.Activation("relu")(batch_norm(conv_for_batch_norm(filters, 3, stride)(y)))
    y = batch_norm(conv_for_batch_norm(4 * filters, 1, 1)(y))
    shortcut = x
    if stride != 1 or x.shape[-1] != 4 * filters:
        shortcut = batch_norm(conv_for_batch_norm(4 * filters, 1, stride)(x))
    return layers.Activation("relu")(layers.Add()([y, shortcut]))


def resnet50(input_shape, num_classes):
    """ResNet-50 v1.5, NHWC (Keras' own keras.applications.ResNet50 is v1, with biased
    convolutions, so it is not Tandem's model)."""
    inputs = layers.Input(shape=input_shape)  # (B, 224, 224, 3)
    x = layers.Activation("relu")(batch_norm(conv_for_batch_norm(64, 7, 2)(inputs)))
    x = layers.MaxPooling2D(3, 2, padding="same")(x)  # (B, 56, 56, 64)
    for stage, (filters, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for block in range(blocks):
            x = bottleneck(x, filters, 2 if stage > 0 and block == 0 else 1)
    x = layers.GlobalAveragePooling2D()(x)  # (B, 2048)
    return tf.keras.Model(inputs, logits(num_classes)(x), name="resnet50")


class PositionEmbedding(layers.Layer):
    """Learned positions (keras_nlp's PositionEmbedding, as Tandem's): the first `length` rows of
    a trainable (sequence_length, features) table, broadcast to the input's shape."""

    def __init__(self, sequence_length, **kwargs):
        super().__init__(**kwargs)
        self.sequence_length = sequence_length

    def build(self, input_shape):
        self.table = self.add_weight(
            name="embeddings",
            shape=(self.sequence_length, input_shape[-1]),
            initializer="glorot_uniform",
        )

    def call(self, x):  # x (B, S, D)
        length = tf.shape(x)[1]
        return tf.broadcast_to(self.table[:length], tf.shape(x))  # (B, S, D)


def encoder_block(x, config):
    """One post-layer-norm block: attention and feed-forward sublayers, each added to its input
    and normalised."""
    hidden, heads, dropout = config["hidden_size"], config["heads"], config["dropout"]
    attention = layers.MultiHeadAttention(heads, hidden // heads, dropout=dropout)(x, x)
    attention = layers.Dropout(dropout)(attention)
    y = layers.LayerNormalization(epsilon=config["layer_norm_epsilon"])(
        layers.Add()([x, attention])
    )
    feed_forward = layers.Dense(config["intermediate_size"], activation="gelu")(y)
    feed_forward = layers.Dropout(dropout)(layers.Dense(hidden)(feed_forward))
    return layers.LayerNormalization(epsilon=config["layer_norm_epsilon"])(
        layers.Add()([y, feed_forward])
    )


def transformer(sequence_length, num_classes, config):
    """Tandem's zoo::transformer_encoder (config: the fields of TransformerEncoderConfig)."""
    inputs = layers.Input(shape=(sequence_length,), dtype="int32")  # (B, S) token ids
    tokens = layers.Embedding(config["vocabulary_size"], config["hidden_size"])(inputs)
    positions = PositionEmbedding(config["max_sequence_length"])(tokens)
    x = layers.LayerNormalization(epsilon=config["layer_norm_epsilon"])(
        layers.Add()([tokens, positions])
    )
    x = layers.Dropout(config["dropout"])(x)  # (B, S, D)
    for _ in range(config["layers"]):
        x = encoder_block(x, config)
    x = layers.GlobalAveragePooling1D()(x)  # (B, D)
    return tf.keras.Model(inputs, logits(num_classes)(x), name="transformer")


def build(workload):
    """The Keras model of a run_peer.Workload."""
    if workload.model == "transformer":
        return transformer(workload.input_shape[0], workload.classes, workload.transformer)
    builders = {"mlp": mlp, "cnn": cnn, "resnet50": resnet50}
    return builders[workload.model](workload.input_shape, workload.classes)


def train_step_timer(workload, threads, device, precision, seed, jit_compile=False):
    """Builds the model, its Adam optimizer and one synthetic batch on `device`; returns
    (version, parameters, trainable_parameters, step) where step() runs one training step and
    returns its loss as a float, which waits for the step to finish."""
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(seed)
    if precision == "bf16":
        tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    device_name = "/GPU:0" if device == "cuda" else "/CPU:0"
    with tf.device(device_name):
        model = build(workload)
        # Keras' defaults otherwise, as a user's model.compile(optimizer="adam") gets them.
        optimizer = tf.keras.optimizers.Adam(learning_rate=workload.learning_rate)
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        features, labels = workload.synthetic_batch()
        features = tf.constant(features)
        labels = tf.constant(labels)

    # Keras' own Model.train_step without the metrics; jit_compile off as Keras' default, or on
    # (XLA) when asked.
    @tf.function(jit_compile=jit_compile)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    def step():
        with tf.device(device_name):
            return float(train_step(features, labels))

    trainable = sum(weight.shape.num_elements() for weight in model.trainable_weights)
    return tf.__version__, model.count_params(), trainable, step


def unsupported(device, precision):
    """Why this TensorFlow cannot run the combination, or None."""
    if device == "cuda" and not tf.config.list_physical_devices("GPU"):
        return f"TensorFlow {tf.__version__} sees no GPU (tensorflow-cpu, or no CUDA driver)"
    return None
