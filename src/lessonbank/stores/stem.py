from lessonbank.text import stem as stem  # moved to lessonbank.text
