# ranks: none (needs TensorFlow and Keras, which Debian lacks; tests/python/test_tensorflow.py makes these calls in the modern stage, tests/modern/run.sh)
import tensorflow as tf
import starling.tensorflow as bf

bf.init()                                   # exponential-2 graph, as BlueFog
bf.broadcast_variables(model.variables, root_rank=0)
with tf.GradientTape() as tape:
    loss = loss_fn(model(x), y)
tape = bf.DistributedGradientTape(tape)     # gradient() averages over every rank
grads = tape.gradient(loss, model.trainable_variables)
optimizer.apply_gradients(zip(grads, model.trainable_variables))

mean = bf.allreduce(t)                      # average=True, as BlueFog's
near = bf.neighbor_allreduce(t)             # with the in-neighbors on the topology
step = bf.neighbor_allreduce(t, self_weight=0.5, src_weights={(r - 1) % n: 0.5},
                             dst_weights=[(r + 1) % n])   # dynamic topology
