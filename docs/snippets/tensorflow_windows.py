# ranks: none (needs TensorFlow, which Debian lacks; tests/python/test_tensorflow.py makes these calls in the modern stage, tests/modern/run.sh)
import tensorflow as tf
import starling.tensorflow as bf

bf.init()
out = bf.out_neighbor_ranks()
v = tf.Variable(tf.fill([1000], float(bf.rank())))   # the same shape and dtype on every rank
bf.win_create(v, "x", zero_init=True)                 # collective
bf.turn_on_win_ops_with_associated_p()                # push-sum: p travels with the data
bf.win_accumulate(v, "x", self_weight=0.5, dst_weights={d: 0.5 / len(out) for d in out})
y = bf.win_update_then_collect("x")                   # the collect step; v holds y too
estimate = y / bf.win_associated_p("x")
bf.win_free("x")
