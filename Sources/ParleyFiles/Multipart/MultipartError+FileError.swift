// Kept apart from the parser, which compiles on its own for the fuzz target.
extension MultipartError {
    /// The file error a door answers with: 413 for an over-size body, 400 otherwise.
    public var fileError: FileError {
        FileError(code == .tooLarge ? .tooLarge : .badRequest, message)
    }
}
