// Energy figures of an answer, as the chat shows them under each answer.

package dev.tern.sample

/** Energy per generated token and how it was obtained (a meter, or the power model). */
data class EnergyFigures(
    val millijoulesPerToken: Double,
    /** False when the figure comes from the power model rather than a meter. */
    val measured: Boolean,
    /** The meter's name, e.g. `android battery` or `estimate (power model)`. */
    val meter: String,
)
