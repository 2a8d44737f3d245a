// The UI agent's checks (run from AppLogicTest.kt's main): a valid action on an existing element
// for every `ui` workload case, the risk rules, and the confirm-then-act loop.

package dev.tern.sample

import dev.tern.*
import java.io.File
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.flow.first

suspend fun CoroutineScope.agent(engine: Engine, dir: File) {
    val goals = dir.listFiles { f -> f.name.endsWith(".goal.txt") }!!.sortedBy { it.name }
    test("the agent gives a valid action on an existing element for each of the ${goals.size} ui workloads") {
        expect(goals.isNotEmpty()) { "no ui cases in $dir" }
        UiAgent(engine).use { agent ->
            for (goalFile in goals) {
                val id = goalFile.name.removeSuffix(".goal.txt")
                val screen = screenFromJson(File(dir, "$id.screen.json").readText())
                val goal = goalFile.readText().trim()
                agent.reset()
                val p = agent.propose(screen, goal)
                val element = screen.elements.firstOrNull { it.id == p.action.id }
                when (p.action.action) {
                    UiActionKind.BACK -> expect(p.action.id == null) { "$id: back with an id" }
                    UiActionKind.TAP -> expect(element != null && element.clickable) { "$id: tap on ${p.action.id}" }
                    UiActionKind.TYPE -> expect(element != null && !p.action.text.isNullOrEmpty()) { "$id: type ${p.action}" }
                    UiActionKind.SCROLL -> expect(element != null) { "$id: scroll on ${p.action.id}" }
                }
                expect(p.element == element) { "$id: proposal names ${p.element}, action ${p.action}" }
                println("     $id: ${p.describe()} (risk ${p.risk})")
            }
        }
    }

    test("risky actions are recognised: sending, paying, deleting") {
        fun el(text: String, cls: String = "Button") = UiElement(id = 1u, className = cls, text = text, clickable = true)
        val tap = UiAction(action = UiActionKind.TAP, id = 1u, text = null)
        val type = UiAction(action = UiActionKind.TYPE, id = 1u, text = "hello")
        expect(riskOf(tap, el("Send")) == Risk.SENDS) { "Send" }
        expect(riskOf(tap, el("Pay \$12.00")) == Risk.PAYS) { "Pay" }
        expect(riskOf(tap, el("Place order")) == Risk.PAYS) { "Place order" }
        expect(riskOf(tap, el("Delete conversation")) == Risk.DELETES) { "Delete" }
        expect(riskOf(tap, el("Move to trash", "ImageButton")) == Risk.DELETES) { "trash" }
        expect(riskOf(tap, el("Timer", "Tab")) == Risk.NONE) { "Timer" }
        expect(riskOf(tap, el("Sender settings")) == Risk.NONE) { "Sender is not send" }
        expect(riskOf(type, el("Send a message", "EditText")) == Risk.NONE) { "typing" }
        val proposal = Proposal("g", Screen("App", listOf(el("Send"))), tap, el("Send"), Risk.SENDS)
        expect(proposal.needsConfirmation(autoRunSafe = true)) { "a send ran without asking" }
    }

    test("the agent loop asks before acting and does nothing when the user declines") {
        val screen = screenFromJson(File(dir, "dev-ui-2.screen.json").readText())
        var performed = 0
        UiAgent(engine).use { agent ->
            val controller = UiAgentController(agent, { screen }, { _, _ -> performed++; true }, this)
            controller.start("Set a timer for 10 minutes")
            val asked = controller.state.first { it is AgentState.Confirm || it is AgentState.Failed || it is AgentState.Finished }
            expect(asked is AgentState.Confirm) { "state $asked" }
            controller.reject()
            val end = controller.state.first { it is AgentState.Finished }
            expect(performed == 0 && (end as AgentState.Finished).reason == "the user declined") { "end $end, performed $performed" }
        }
    }
}
