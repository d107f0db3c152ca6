# ranks: none (needs TensorFlow and Keras, which Debian lacks; tests/python/test_tensorflow.py makes these calls in the modern stage, tests/modern/run.sh)
import starling.keras as sk
model.fit(x, y, callbacks=[sk.BroadcastInitialVariables(0),      # rank 0's initial weights
                           sk.ModelAveraging(every=2)])          # average every 2 batches
# sk.ModelAveraging(neighbors=True): neighbor_allreduce on the topology instead
