# Writes the .java files SWIG generated in DIR, one path per line, to OUT (a javac
# response file for add_jar).
file(GLOB sources "${DIR}/*.java")
list(SORT sources)
list(JOIN sources "\n" text)
file(WRITE "${OUT}" "${text}\n")
