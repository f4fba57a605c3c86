"""flashfleet: bring up, benchmark and tear down GLM-5.3-Flash SGLang serving clusters."""

__version__ = "0.1.0"
