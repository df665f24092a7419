"""Reflectors turn one episode into one reflection with one LLM call (see ``base.py``)."""

from lessonbank.reflectors.base import Parsed, Reflector, ReflectorRun, reflect
from lessonbank.reflectors.dual import DualReflector, parse_dual
from lessonbank.reflectors.insight import InsightReflector, parse_insight
from lessonbank.reflectors.lesson import LessonReflector, parse_lesson
from lessonbank.reflectors.reflexion import ReflexionReflector, parse_reflexion
from lessonbank.reflectors.registry import build_reflectors, register_reflector, registered_reflectors

__all__ = [
    "DualReflector",
    "InsightReflector",
    "LessonReflector",
    "Parsed",
    "Reflector",
    "ReflectorRun",
    "ReflexionReflector",
    "build_reflectors",
    "parse_dual",
    "parse_insight",
    "parse_lesson",
    "parse_reflexion",
    "reflect",
    "register_reflector",
    "registered_reflectors",
]
