"""The doctor on a user's script now lives in :mod:`perfsuite.tools.doctor.script`; this name is kept for imports."""

from perfsuite.tools.doctor.script import Counterfactual, choose, diagnose_script, in_script_terms

__all__ = ["Counterfactual", "choose", "diagnose_script", "in_script_terms"]
