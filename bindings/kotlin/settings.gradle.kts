// The Tern Android library as a standalone Gradle build: `gradle assembleRelease` here, or
// `includeBuild("path/to/tern/bindings/kotlin")` from an app's settings.gradle.kts.
pluginManagement {
    repositories {
        google()
        mavenCentral()
        gradlePluginPortal()
    }
}

dependencyResolutionManagement {
    repositoriesMode.set(RepositoriesMode.FAIL_ON_PROJECT_REPOS)
    repositories {
        google()
        mavenCentral()
    }
}

rootProject.name = "tern-android"
