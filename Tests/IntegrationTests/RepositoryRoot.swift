import Foundation

/// The repository's root folder (this file is at `Tests/IntegrationTests/` in it).
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()
