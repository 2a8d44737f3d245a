// Speculative decoding over the generated records: speculation is on (automatic) by default and
// set through SessionOptions(speculation = SpeculationOptions(...)); HistoryStore and
// HistoryScope come from the generated code as they are.

package dev.tern

/** Share of the drafted tokens the model accepted (0 when nothing was drafted). */
val SpeculationStats.acceptanceRate: Double
    get() = if (draftedTokens == 0u) 0.0 else acceptedTokens.toDouble() / draftedTokens.toDouble()
