"""The application: what train.py, test.py and report.py run.

Training (:mod:`.training`), evaluation (:mod:`.evaluation`), run folders and
their files (:mod:`.runs`), several seeds on Ray (:mod:`.multi_seed`), reports
over seeds (:mod:`.reports`, :mod:`.report_runs`), curves (:mod:`.plotting`),
the scripts' shared arguments and exits (:mod:`.command_line`, :mod:`.startup`).
Imports nothing here: the scripts import :mod:`.startup` first, before torch.
"""
