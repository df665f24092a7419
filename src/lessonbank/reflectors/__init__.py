"""Reflectors turn one episode into one reflection with one LLM call (see ``base.py``)."""

from lessonbank.reflectors.base import Parsed, Reflector, ReflectorRun, reflect
from lessonbank.reflectors.lesson import LessonReflector, parse_lesson

__all__ = ["LessonReflector", "Parsed", "Reflector", "ReflectorRun", "parse_lesson", "reflect"]
