"""PCS Lifeguard: the shared code of the controller's Lambdas and of the node side."""

from __future__ import annotations

__version__ = "0.1.0"
