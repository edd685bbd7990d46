"""The data the algorithms learn from: batches of episodes (:mod:`.episodes`), of
trials (:mod:`.trials`), and the linear value baseline fitted on them (:mod:`.baseline`)."""
