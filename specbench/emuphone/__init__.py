"""An emulated Android phone that speaks the adb device protocol on loopback (see phone.py)."""
