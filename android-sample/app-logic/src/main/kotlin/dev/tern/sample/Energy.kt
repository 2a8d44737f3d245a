// Energy figures of an answer, as the chat shows them under each answer, and the energy mode the
// chat's settings switch.

package dev.tern.sample

import dev.tern.EnergyKind
import dev.tern.EnergyMode
import dev.tern.Stats

/** Energy per generated token and how it was obtained (a meter, or the power model). */
data class EnergyFigures(
    val millijoulesPerToken: Double,
    /** False when the figure comes from the power model rather than a meter. */
    val measured: Boolean,
    /** The meter's name, e.g. `android battery` or `estimate (power model)`. */
    val meter: String,
) {
    companion object {
        /** The decode phase's energy per token; none when the meter could not be read. */
        fun of(stats: Stats): EnergyFigures? {
            val perToken = stats.energy.decode.joulesPerToken ?: return null
            return EnergyFigures(perToken * 1e3, stats.energy.kind == EnergyKind.MEASURED, stats.energy.meter)
        }
    }
}

/** The modes the settings offer, in the words the screen shows. */
val ENERGY_MODES: List<Pair<String, EnergyMode>> = listOf(
    "Performance" to EnergyMode.Performance,
    "Balanced" to EnergyMode.Balanced,
    "Power saver" to EnergyMode.PowerSaver,
)

/** A mode's name on screen. */
fun energyModeName(mode: EnergyMode): String = when (mode) {
    is EnergyMode.Performance -> "Performance"
    is EnergyMode.Balanced -> "Balanced"
    is EnergyMode.PowerSaver -> "Power saver"
    is EnergyMode.Custom -> "Custom"
}
