"""Orbax checkpoints saved to /tmp and read back."""
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

tree = {"w": jnp.arange(6.0).reshape(2, 3), "step": 3, "nested": {"b": np.ones(2)}}
checkpointer = ocp.PyTreeCheckpointer()
checkpointer.save("/tmp/ckpt/1", tree)
restored = checkpointer.restore("/tmp/ckpt/1")
print("restored", sorted(restored), restored["w"].sum())
with ocp.CheckpointManager("/tmp/managed", options=ocp.CheckpointManagerOptions(max_to_keep=2)) as manager:
    for step in range(3):
        manager.save(step, args=ocp.args.StandardSave(tree))
    manager.wait_until_finished()
    print("steps", manager.all_steps())
