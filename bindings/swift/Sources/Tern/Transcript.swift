// Conversations that serialize: `Codable` for the generated message records, in the JSON the
// Rust SDK's `Message` uses ({"role": "user", "content": "..."}), so a transcript saved by one
// side reads on the other.

import Foundation

extension MessageRole: Codable {
    /// The role's name in transcripts.
    public var name: String {
        switch self {
        case .system: return "system"
        case .user: return "user"
        case .assistant: return "assistant"
        case .tool: return "tool"
        }
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        let name = try container.decode(String.self)
        switch name {
        case "system": self = .system
        case "user": self = .user
        case "assistant": self = .assistant
        case "tool": self = .tool
        default:
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "unknown message role '\(name)'")
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }
}

extension ConversationMessage: Codable {
    private enum CodingKeys: String, CodingKey {
        case role, content
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(role: try container.decode(MessageRole.self, forKey: .role),
                  content: try container.decode(String.self, forKey: .content))
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(role, forKey: .role)
        try container.encode(content, forKey: .content)
    }
}
