// A strict JSON reader for the tests (the JVM has none built in): objects become Maps, arrays
// Lists, integers Long, other numbers Double. Anything that is not one complete JSON value
// throws IllegalArgumentException.

object Json {
    fun parse(text: String): Any? {
        val reader = Reader(text)
        val value = reader.value()
        reader.skipSpace()
        require(reader.pos == text.length) { "text after the JSON value at ${reader.pos}" }
        return value
    }

    private class Reader(val s: String) {
        var pos = 0

        fun skipSpace() {
            while (pos < s.length && s[pos] in " \t\r\n") pos++
        }

        private fun take(c: Char) {
            skipSpace()
            require(pos < s.length && s[pos] == c) { "expected '$c' at $pos" }
            pos++
        }

        private fun peek(): Char {
            skipSpace()
            require(pos < s.length) { "unexpected end" }
            return s[pos]
        }

        fun value(): Any? = when (peek()) {
            '{' -> obj()
            '[' -> array()
            '"' -> string()
            't' -> literal("true", true)
            'f' -> literal("false", false)
            'n' -> literal("null", null)
            else -> number()
        }

        private fun obj(): Map<String, Any?> {
            take('{')
            val map = LinkedHashMap<String, Any?>()
            if (peek() == '}') return map.also { pos++ }
            while (true) {
                skipSpace()
                val key = string()
                take(':')
                require(map.put(key, value()) == null) { "duplicate key $key" }
                if (peek() == ',') pos++ else return map.also { take('}') }
            }
        }

        private fun array(): List<Any?> {
            take('[')
            val list = mutableListOf<Any?>()
            if (peek() == ']') return list.also { pos++ }
            while (true) {
                list += value()
                if (peek() == ',') pos++ else return list.also { take(']') }
            }
        }

        private fun string(): String {
            take('"')
            val out = StringBuilder()
            while (true) {
                require(pos < s.length) { "unterminated string" }
                when (val c = s[pos++]) {
                    '"' -> return out.toString()
                    '\\' -> {
                        require(pos < s.length) { "unterminated escape" }
                        when (val e = s[pos++]) {
                            '"', '\\', '/' -> out.append(e)
                            'b' -> out.append('\b')
                            'f' -> out.append('\u000c')
                            'n' -> out.append('\n')
                            'r' -> out.append('\r')
                            't' -> out.append('\t')
                            'u' -> {
                                require(pos + 4 <= s.length) { "short \\u escape" }
                                out.append(s.substring(pos, pos + 4).toInt(16).toChar())
                                pos += 4
                            }
                            else -> throw IllegalArgumentException("bad escape \\$e")
                        }
                    }
                    else -> {
                        require(c >= ' ') { "control character in a string" }
                        out.append(c)
                    }
                }
            }
        }

        private fun literal(word: String, value: Any?): Any? {
            require(s.startsWith(word, pos)) { "bad literal at $pos" }
            pos += word.length
            return value
        }

        private fun number(): Any {
            val m = Regex("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?").matchAt(s, pos)
                ?: throw IllegalArgumentException("bad value at $pos")
            pos += m.value.length
            // JSON integers have no size limit: one past Long's range is read as a Double.
            val integer = m.groupValues[2].isEmpty() && m.groupValues[3].isEmpty()
            return (if (integer) m.value.toLongOrNull() else null) ?: m.value.toDouble()
        }
    }
}
