// Speculative decoding over the generated records: speculation is on (automatic) by default and
// set through `SessionOptions(speculation: SpeculationOptions(...))`; `HistoryStore` and
// `HistoryScope` come from the generated code as they are.

extension SpeculationStats {
    /// Share of the drafted tokens the model accepted (0 when nothing was drafted).
    public var acceptanceRate: Double {
        draftedTokens == 0 ? 0 : Double(acceptedTokens) / Double(draftedTokens)
    }
}
