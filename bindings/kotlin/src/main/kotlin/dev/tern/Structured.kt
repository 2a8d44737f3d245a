// Typed answers and the automatic tool loop, over the generated `generateJson`, `send` and
// `sendToolResult`.

package dev.tern

import kotlinx.coroutines.flow.flow

/**
 * How the model answers with a [T]: the JSON Schema of its JSON form, and how to decode it.
 * Usually the companion object of the type:
 *
 * ```kotlin
 * data class Trip(val city: String, val days: Int) {
 *     companion object : Generable<Trip> {
 *         override val jsonSchema = """{"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
 *             "days": {"type": "integer", "minimum": 1, "maximum": 30}},
 *             "required": ["city", "days"], "additionalProperties": false}"""
 *         override fun decode(json: String) = JSONObject(json).let { Trip(it.getString("city"), it.getInt("days")) }
 *     }
 * }
 * val trip = session.generate("Plan a trip to Lyon.", Trip)
 * ```
 */
interface Generable<T> {
    /** JSON Schema of the type's JSON form, as JSON text. */
    val jsonSchema: String

    /** The value of an answer that matches [jsonSchema]. */
    fun decode(json: String): T
}

/**
 * Sends [text] and returns the answer as a [T] (see the generated `generateJson`): one turn of
 * the conversation. Cancelling the coroutine stops the generation; an answer cut off by
 * `maxTokens` raises `TernException.Constraint`, and so does one [type] cannot decode.
 */
suspend fun <T> Session.generate(text: String, type: Generable<T>): T {
    val json = generateJson(text, type.jsonSchema)
    return try {
        type.decode(json)
    } catch (e: Exception) {
        throw TernException.Constraint("the answer matches the schema but does not decode: ${e.message}")
    }
}

/** A tool and the code that runs it, for [Session.reply] with handlers. */
class ToolHandler(val tool: Tool, val run: suspend (arguments: String) -> String)

/** The end of a tool loop: the model's text answer, and each call made on the way with its result. */
data class ToolReply(val reply: Reply, val calls: List<Pair<ToolCall, String>>)

/**
 * Sends [text] with [tools] and runs the calls the model makes: each goes to its handler, whose
 * result is sent back, until the model answers in text. After [maxCalls] calls the model must
 * answer in text, so the loop always ends. The tools stay set on the session. A handler's
 * exception ends the loop and is rethrown; cancelling the coroutine stops it.
 */
suspend fun Session.reply(
    text: String,
    tools: List<ToolHandler>,
    choice: ToolChoice = ToolChoice.AUTO,
    maxCalls: Int = 8,
): ToolReply {
    val handlers = tools.associateBy { it.tool.name }
    setTools(tools.map { it.tool }, choice)
    val calls = mutableListOf<Pair<ToolCall, String>>()
    var answer = reply(text)
    while (true) {
        val call = answer.toolCall ?: return ToolReply(answer, calls)
        val handler = handlers[call.name] ?: throw TernException.Internal("the model called ${call.name}, which has no handler")
        val result = handler.run(call.arguments)
        calls += call to result
        answer = if (calls.size >= maxCalls) {
            flow { sendLastToolResult(result).use { emitEvents(it) } }.toReply()
        } else {
            replyToolResult(result)
        }
    }
}
