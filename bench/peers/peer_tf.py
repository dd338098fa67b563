"""tf.data with tensorflow-cpu, as TensorFlow's input-pipeline guide and its
ResNet preprocessing do it: tf.io.decode_and_crop_jpeg over a
sample_distorted_bounding_box window (decodes only the crop), resize to 224
bilinear, random flip, normalise; eval decodes whole, resizes the short side
to 256 and crops the centre. map(num_parallel_calls=AUTOTUNE),
batch(drop_remainder), prefetch(AUTOTUNE), and the threads = cores (the
private thread pool, intra- and inter-op). PNGs (5% of the small set) take
decode_png + crop. Output layout NHWC, TensorFlow's own."""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def train_image(data, seed):
    def window(shape):
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            shape, tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]), min_object_covered=0.0,
            aspect_ratio_range=(3 / 4, 4 / 3), area_range=(0.08, 1.0), max_attempts=10,
            use_image_if_no_bounding_boxes=True)
        return begin, size

    def jpeg():
        begin, size = window(tf.io.extract_jpeg_shape(data))
        crop = tf.stack([begin[0], begin[1], size[0], size[1]])
        return tf.io.decode_and_crop_jpeg(data, crop, channels=3)

    def other():
        img = tf.io.decode_png(data, channels=3)
        begin, size = window(tf.shape(img))
        return tf.slice(img, begin, size)

    img = tf.cond(tf.io.is_jpeg(data), jpeg, other)
    img = tf.image.resize(img, [224, 224], method="bilinear", antialias=True)
    img = tf.image.random_flip_left_right(img)
    return img


def eval_image(data):
    img = tf.cond(tf.io.is_jpeg(data), lambda: tf.io.decode_jpeg(data, channels=3),
                  lambda: tf.io.decode_png(data, channels=3))
    shape = tf.cast(tf.shape(img)[:2], tf.float32)
    scale = 256.0 / tf.reduce_min(shape)
    size = tf.cast(tf.math.floor(shape * scale), tf.int32)
    size = tf.maximum(size, 256)
    img = tf.image.resize(img, size, method="bilinear", antialias=True)
    top = (size[0] - 224) // 2
    left = (size[1] - 224) // 2
    return tf.slice(img, tf.stack([top, left, 0]), [224, 224, 3])


def make(a, files, labels):
    tf.config.threading.set_intra_op_parallelism_threads(a.cores)
    tf.config.threading.set_inter_op_parallelism_threads(a.cores)
    tf.random.set_seed(a.seed)
    mean = tf.constant(common.MEAN, dtype=tf.float32)
    std = tf.constant(common.STD, dtype=tf.float32)

    def load(path, label):
        data = tf.io.read_file(path)
        img = train_image(data, a.seed) if a.recipe == "train" else eval_image(data)
        img = (img / 255.0 - mean) / std
        return tf.cast(img, tf.float32), label

    ds = tf.data.Dataset.from_tensor_slices((files, labels))
    if a.recipe == "train":
        ds = ds.shuffle(len(files), seed=a.seed, reshuffle_each_iteration=True)
    ds = ds.repeat()  # one iterator across epochs: no restart of the parallel map
    ds = ds.map(load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    ds = ds.batch(a.batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    opts = tf.data.Options()
    opts.threading.private_threadpool_size = a.cores
    return ds.with_options(opts)


def to_numpy(batch):
    return batch[0].numpy(), "NHWC"


if __name__ == "__main__":
    common.run("tf.data", make, to_numpy, f"tensorflow-cpu {tf.__version__}")
