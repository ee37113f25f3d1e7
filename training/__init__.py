"""Offline MuscleVAE training (torch). Imports engine math; the engine never imports this.

The muscle and fatigue equations come from engine.muscle and engine.fatigue, whose
functions take the array module (`xp=torch`) so both sides share one definition.
"""
