// The Auto-reply screen's conversations: one thread per contact, fed by incoming messages (the
// notification listener, or typed in the demo) and by the replies the user sends.

package dev.tern.sample

import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asStateFlow
import kotlinx.coroutines.flow.update

/** A message that arrived and waits for the user's reply. */
data class Incoming(val contact: Contact, val text: String)

class ThreadBook(initial: List<ContactThread> = emptyList()) {
    private val _threads = MutableStateFlow(initial.associateBy { it.contact.key })
    /** Threads by contact key. */
    val threads: StateFlow<Map<String, ContactThread>> = _threads.asStateFlow()

    private val _pending = MutableStateFlow<List<Incoming>>(emptyList())
    /** Messages not answered yet, oldest first. */
    val pending: StateFlow<List<Incoming>> = _pending.asStateFlow()

    fun thread(contact: Contact): ContactThread = _threads.value[contact.key] ?: ContactThread(contact, emptyList())

    /** A message from [contact] arrived. */
    fun received(contact: Contact, text: String) {
        _pending.update { it + Incoming(contact, text) }
    }

    /**
     * The user answered [incoming] with [reply]: both join the contact's thread, so later
     * suggestions see them (the reply shows the user's style).
     */
    fun replied(incoming: Incoming, reply: String) {
        _pending.update { it - incoming }
        _threads.update { all ->
            val thread = all[incoming.contact.key] ?: ContactThread(incoming.contact, emptyList())
            all + (incoming.contact.key to thread.with(ThreadMessage(false, incoming.text)).with(ThreadMessage(true, reply)))
        }
    }

    /** The user dismissed [incoming] without replying; it still joins the thread. */
    fun dismissed(incoming: Incoming) {
        _pending.update { it - incoming }
        _threads.update { all ->
            val thread = all[incoming.contact.key] ?: ContactThread(incoming.contact, emptyList())
            all + (incoming.contact.key to thread.with(ThreadMessage(false, incoming.text)))
        }
    }

    companion object {
        /** Two contacts with a few messages each, for trying the screen without notifications. */
        fun withDemoThreads(): ThreadBook {
            val priya = Contact("demo:priya", "Priya")
            val mom = Contact("demo:mom", "Mom")
            return ThreadBook(
                listOf(
                    ContactThread(
                        priya,
                        listOf(
                            ThreadMessage(false, "are we still on for climbing tomorrow?"),
                            ThreadMessage(true, "yes!! 6pm at the usual gym right?"),
                            ThreadMessage(false, "yep. can you bring the extra harness"),
                            ThreadMessage(true, "sure thing, I'll bring the extra harness"),
                        ),
                    ),
                    ContactThread(
                        mom,
                        listOf(
                            ThreadMessage(false, "Did you eat dinner?"),
                            ThreadMessage(true, "Yes mom, I ate dinner, pasta again haha"),
                            ThreadMessage(false, "You need vegetables too"),
                            ThreadMessage(true, "Yes mom, I will eat vegetables tomorrow haha"),
                        ),
                    ),
                ),
            ).also {
                it.received(priya, "also Jo might join, is that ok?")
                it.received(mom, "And call your grandmother this weekend")
            }
        }
    }
}
