import os
import sys

# The tiny run configs of the training tests (`helpers.tiny_config`).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "training"))
