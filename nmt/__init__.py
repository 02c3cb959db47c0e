"""nmt: English→French LSTM encoder–decoder with attention, small enough to read in an afternoon."""

__version__ = "0.1.0"
