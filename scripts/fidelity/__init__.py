"""Does compression change what the model says? Teacher-forced NLL (`bench fidelity`), final-
answer agreement (`bench agreement`), the FP8 cache (`bench fp8-fidelity`), the rule that picks
the default score (`bench fidelity decide`) and the time-boxed GPU runner (`bench fidelity-gpu`)."""
