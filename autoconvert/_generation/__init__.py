"""The generated flat call: functions with another function's own signature, the forms'
source laid out from a spec's steps, and which plans get one, compiled once per shape.
"""
